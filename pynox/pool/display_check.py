"""The pool server's checks of a child's `value` and `image` frames.

The child's side (pynox.pool.display) is pynox's code, but the program can write frames
on the same channel: every field is checked here as data from the program. A value is
one string of valid UTF-8 within the run's bound (pynox.limits.value_limit); an image is a
PNG whose width and height the server reads from its own IHDR chunk (checksum included),
within the count, byte and side bounds of pynox.limits. A frame that breaks them ends the request.
"""

import binascii

from pynox.limits import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, MAX_IMAGES, value_limit
from pynox.pool.channel import ChannelError

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class Shown:
    """What one run or session step gives back besides its output."""

    __slots__ = ("value", "images", "image_bytes", "echo", "value_limit")

    def __init__(self, echo: bool, max_output: int) -> None:
        self.echo = echo  # whether the run's code may have a value (code, not a script)
        self.value_limit = value_limit(max_output)
        self.value: str | None = None
        self.images: list[dict[str, object]] = []
        self.image_bytes = 0

    def take_value(self, frame: dict[str, object]) -> None:
        text = frame.get("repr")
        if not self.echo:
            raise ChannelError("a value frame for a run that has no value")
        if self.value is not None:
            raise ChannelError("a second value frame for one run")
        if type(text) is not str:
            raise ChannelError("a value frame without a string repr")
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:
            raise ChannelError("a value that is not valid UTF-8") from None
        if size > self.value_limit:
            raise ChannelError(f"a value of {size} bytes, over the bound of {self.value_limit}")
        self.value = text

    def take_image(self, frame: dict[str, object]) -> None:
        data = frame.get("data")
        if type(data) is not str:
            raise ChannelError("an image frame without base64 data")
        if len(self.images) >= MAX_IMAGES:
            raise ChannelError(f"more than {MAX_IMAGES} images, the bound per run")
        # base64 of the bytes still allowed, before decoding anything.
        if len(data) > 4 * ((MAX_IMAGE_BYTES - self.image_bytes + 2) // 3):
            raise ChannelError(f"images of more than {MAX_IMAGE_BYTES} bytes in one run")
        try:
            png = binascii.a2b_base64(data)
        except (binascii.Error, ValueError):
            raise ChannelError("an image whose data is not base64") from None
        if self.image_bytes + len(png) > MAX_IMAGE_BYTES:
            raise ChannelError(f"images of more than {MAX_IMAGE_BYTES} bytes in one run")
        width, height = png_size(png)
        self.image_bytes += len(png)
        # Encoded again: the result carries the server's own base64, not the child's text.
        encoded = binascii.b2a_base64(png, newline=False).decode()
        self.images.append({"mime": "image/png", "width": width, "height": height, "data": encoded})

    def fields(self) -> "dict[str, object]":
        """The result's `value` and `images`."""
        return {"value": self.value, "images": self.images}


def png_size(png: bytes) -> "tuple[int, int]":
    """The width and height a PNG's IHDR chunk gives; ChannelError for what is not a PNG."""
    if not png.startswith(_PNG_SIGNATURE):
        raise ChannelError("an image that is not a PNG")
    ihdr = png[8:33]  # length, type, 13 bytes of data, checksum
    if len(ihdr) < 25 or ihdr[:8] != b"\x00\x00\x00\x0dIHDR":
        raise ChannelError("a PNG that does not start with its IHDR chunk")
    if binascii.crc32(ihdr[4:21]) != int.from_bytes(ihdr[21:25], "big"):
        raise ChannelError("a PNG whose IHDR chunk fails its checksum")
    width, height = int.from_bytes(ihdr[8:12], "big"), int.from_bytes(ihdr[12:16], "big")
    if not (1 <= width <= MAX_IMAGE_SIDE and 1 <= height <= MAX_IMAGE_SIDE):
        raise ChannelError(
            f"a PNG of {width}x{height} pixels; images are 1 to {MAX_IMAGE_SIDE} pixels a side"
        )
    return width, height
