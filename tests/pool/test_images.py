"""Images: the figures a program draws with matplotlib come back as PNGs, with no grant,
each checked by the pool server (signature, its own reading of IHDR, count, bytes, size);
frames the program forges are held to the same rules."""

from __future__ import annotations

import base64
import os
import struct
import time
import zlib

import pytest
from support.pool_client import PoolClient
from support.pool_requests import FORGE as FORGE_FRAME
from support.pool_requests import code, new_id, serves, step

from pynox.api.pool import Pool
from pynox.limits import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, MAX_IMAGES

PACKAGES = os.environ.get("PYNOX_TEST_PACKAGES", "")
needs_matplotlib = pytest.mark.skipif(
    not os.path.isdir(os.path.join(PACKAGES, "matplotlib")),
    reason="PYNOX_TEST_PACKAGES names no directory with matplotlib; the nox session sets it",
)

TWO_FIGURES = code("""
    import matplotlib.pyplot as plt
    plt.figure(figsize=(4, 3), dpi=100)
    plt.plot([1, 3, 2])
    plt.show()
    plt.figure(figsize=(2, 1), dpi=50)
    plt.bar(["a", "b"], [3, 4])
    print("drawn")
""")


def png(width: int, height: int, crc: int | None = None) -> bytes:
    """A small valid PNG (grey pixels); crc replaces IHDR's checksum when given."""

    def chunk(kind: bytes, data: bytes, checksum: int | None = None) -> bytes:
        check = zlib.crc32(kind + data) if checksum is None else checksum
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", check)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header, crc)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def ihdr_size(data: bytes) -> tuple[int, int]:
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


# The pool's forge prelude (support.pool_requests) and a frame of an image.
FORGE = FORGE_FRAME + code("""
    import base64

    def image(data, **fields):
        forge({"type": "image", "data": base64.b64encode(data).decode(), **fields})
""")


def forging(*images: bytes, after: str = "") -> str:
    lines = [f"image({data!r})" for data in images]
    return FORGE + "\n".join(lines) + "\n" + after


def run_code(pool: PoolClient, program: str, **fields: object) -> dict[str, object]:
    return pool.run({"id": new_id("img"), "code": program, **fields}, timeout=120)


def assert_pool_error(result: dict[str, object], *words: str) -> None:
    error = result["error"]
    assert result["exit"] == 125 and isinstance(error, dict), result
    assert error["type"] == "PoolError", result
    for word in words:
        assert word in error["message"], (word, error)


# --- matplotlib -----------------------------------------------------------------------------


@needs_matplotlib
def test_two_figures_give_two_pngs_of_the_right_size(pool: PoolClient) -> None:
    result = run_code(pool, TWO_FIGURES, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == 0 and result["stdout"] == "drawn\n", result
    images = result["images"]
    assert [(i["mime"], i["width"], i["height"]) for i in images] == [
        ("image/png", 400, 300),
        ("image/png", 100, 50),
    ]
    for image in images:
        assert ihdr_size(base64.b64decode(image["data"])) == (image["width"], image["height"])
    # No grant was needed, and matplotlib found its configuration and caches writable.
    assert result["policy"]["allow_write"] == [] and result["stderr"] == ""


@needs_matplotlib
def test_the_api_gives_image_objects_and_the_tool_names_them() -> None:
    with Pool(workers=1, package_dirs=[PACKAGES]) as pool:
        result = pool.run(TWO_FIGURES, timeout="60s")
        assert [(i.mime, i.width, i.height) for i in result.images] == [
            ("image/png", 400, 300),
            ("image/png", 100, 50),
        ]
        assert all(ihdr_size(i.data) == (i.width, i.height) for i in result.images)
        assert result.text == "drawn\n[image 1: 400x300 PNG]\n[image 2: 100x50 PNG]"
        tool = pool.tool(timeout="60s")
        assert "come back as PNG images" in (tool.__doc__ or "")
        assert tool(TWO_FIGURES).endswith("[image 1: 400x300 PNG]\n[image 2: 100x50 PNG]")


@needs_matplotlib
def test_session_steps_give_the_figures_of_each_step(pool: PoolClient) -> None:
    name = new_id("charts")
    first = step(
        pool, name, "import sys\nx = 1\n'matplotlib' in sys.modules", package_dirs=[PACKAGES]
    )
    assert first["value"] == "False" and first["images"] == []  # never imported for nothing
    drawn = step(pool, name, "import matplotlib.pyplot as plt\nplt.figure(figsize=(3, 2))\nx += 1")
    assert [(i["width"], i["height"]) for i in drawn["images"]] == [(300, 200)]
    later = step(pool, name, "x")
    assert later["value"] == "2" and later["images"] == []  # shown figures are closed


@needs_matplotlib
def test_a_thread_that_shows_figures_between_steps_keeps_its_session(pool: PoolClient) -> None:
    # The thread shows its figure while no step runs: it comes back with the next step.
    name = new_id("thread")
    started = step(
        pool,
        name,
        code("""
            import threading, time
            import matplotlib.pyplot as plt

            def draw():
                time.sleep(0.2)
                plt.figure(figsize=(2, 1), dpi=20)
                plt.show()
                shown.set()

            shown = threading.Event()
            threading.Thread(target=draw).start()
        """),
        package_dirs=[PACKAGES],
        timeout="60s",
    )
    assert started["exit"] == 0 and started["images"] == [], started
    time.sleep(1)
    later = step(pool, name, "shown.wait(10)")
    assert later["value"] == "True" and later["session"]["restarted"] is False, later
    assert [(i["width"], i["height"]) for i in later["images"]] == [(40, 20)]


@needs_matplotlib
def test_figures_past_the_bounds_are_left_out_with_a_note(pool: PoolClient) -> None:
    program = code(f"""
        import matplotlib.pyplot as plt
        plt.figure(figsize=({MAX_IMAGE_SIDE / 50 + 1}, 1), dpi=100)
        for _ in range({MAX_IMAGES + 1}):
            plt.figure(figsize=(1, 1), dpi=20)
    """)
    result = run_code(pool, program, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == 0, result
    assert [(i["width"], i["height"]) for i in result["images"]] == [(20, 20)] * MAX_IMAGES
    assert f"at most {MAX_IMAGE_SIDE} a side" in result["stderr"]
    assert f"at most {MAX_IMAGES} images" in result["stderr"]


# Mathtext that parses only when the figure is drawn: the figure fails at savefig.
FAILS_TO_DRAW = r"""plt.figure(figsize=(1, 1), dpi=20)
plt.title(r"$\frac{$")
"""


@needs_matplotlib
def test_a_figure_that_fails_to_draw_costs_only_itself(pool: PoolClient) -> None:
    program = "import matplotlib.pyplot as plt\n" + FAILS_TO_DRAW
    program += "plt.figure(figsize=(2, 1), dpi=20)\nplt.show()\n"  # shown, then one left open
    program += FAILS_TO_DRAW + "plt.figure(figsize=(3, 1), dpi=20)\nprint('drawn')"
    result = run_code(pool, program, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == 0 and result["stdout"] == "drawn\n", result
    assert [(i["width"], i["height"]) for i in result["images"]] == [(40, 20), (60, 20)]
    assert result["stderr"].count("pynox: a figure could not be drawn: ValueError") == 2, result


@needs_matplotlib
def test_figures_past_the_count_are_not_drawn(pool: PoolClient) -> None:
    # Drawing one that cannot come back would only spend the run's time; this one would
    # fail if drawn, so its note tells which happened.
    program = "import matplotlib.pyplot as plt\n"
    program += f"for _ in range({MAX_IMAGES}):\n    plt.figure(figsize=(1, 1), dpi=20)\n"
    program += FAILS_TO_DRAW
    result = run_code(pool, program, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == 0 and len(result["images"]) == MAX_IMAGES, result
    assert result["stderr"] == (
        f"pynox: a figure was not returned: at most {MAX_IMAGES} images come back per run\n"
    )


@needs_matplotlib
@pytest.mark.parametrize("ending", ["undefined_name", "raise SystemExit(3)"])
def test_code_that_fails_still_gives_its_figures(pool: PoolClient, ending: str) -> None:
    # As a notebook shows a failed cell's figures, after its traceback.
    program = f"import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1), dpi=20)\n{ending}"
    result = run_code(pool, program, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == (1 if ending == "undefined_name" else 3), result
    assert [(i["width"], i["height"]) for i in result["images"]] == [(40, 20)], result


@needs_matplotlib
def test_a_session_step_that_fails_gives_its_figures_at_once(pool: PoolClient) -> None:
    name = new_id("failing-charts")
    program = "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 1), dpi=20)\n1 / 0"
    failed = step(pool, name, program, package_dirs=[PACKAGES])
    assert failed["error"]["type"] == "ZeroDivisionError", failed
    assert [(i["width"], i["height"]) for i in failed["images"]] == [(40, 20)], failed
    assert step(pool, name, "1")["images"] == []  # not a second time with the next step


@needs_matplotlib
def test_figures_are_drawn_at_their_own_dpi(pool: PoolClient) -> None:
    # Not at savefig's: the size checked before drawing is the size drawn.
    program = code("""
        import matplotlib.pyplot as plt
        plt.rcParams["savefig.dpi"] = 1500
        plt.figure(figsize=(2, 1), dpi=50)
    """)
    result = run_code(pool, program, package_dirs=[PACKAGES], timeout="60s")
    assert result["exit"] == 0 and result["stderr"] == "", result
    assert [(i["width"], i["height"]) for i in result["images"]] == [(100, 50)]


@needs_matplotlib
def test_a_preloaded_matplotlib_shows_figures_too() -> None:
    with PoolClient("--package-dir", PACKAGES, preload=["matplotlib.pyplot"], workers=1) as client:
        result = run_code(client, "import matplotlib.pyplot as plt\nplt.figure(figsize=(2, 2))")
        assert [(i["width"], i["height"]) for i in result["images"]] == [(200, 200)], result
        assert client.close() == 0


def test_without_matplotlib_nothing_changes(pool: PoolClient) -> None:
    result = run_code(pool, "print('plain')")
    assert result["exit"] == 0 and result["images"] == [] and result["stderr"] == ""


# --- what the program forges ----------------------------------------------------------------


def test_a_forged_valid_png_is_measured_by_the_server(pool: PoolClient) -> None:
    program = FORGE + f"image({png(3, 2)!r}, width=1000, height=1000, mime='image/svg')\n"
    result = run_code(pool, program)
    assert result["exit"] == 0, result
    (image,) = result["images"]
    assert (image["mime"], image["width"], image["height"]) == ("image/png", 3, 2)
    assert base64.b64decode(image["data"]) == png(3, 2)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"GIF89a" + b"\x00" * 40, ["not a PNG"]),
        (png(3, 2, crc=0), ["checksum"]),
        (png(3, 2)[:20], ["IHDR"]),
        (png(0, 2), ["1 to"]),
        (png(MAX_IMAGE_SIDE + 1, 1), [str(MAX_IMAGE_SIDE)]),
    ],
    ids=["not-png", "lying-ihdr", "cut-short", "zero-width", "too-wide"],
)
def test_a_forged_bad_image_ends_the_request(
    pool: PoolClient, data: bytes, words: list[str]
) -> None:
    assert_pool_error(run_code(pool, forging(data)), "channel", *words)
    serves(pool)


def test_too_many_images_end_the_request(pool: PoolClient) -> None:
    result = run_code(pool, forging(*[png(1, 1)] * (MAX_IMAGES + 1)))
    assert_pool_error(result, f"more than {MAX_IMAGES} images")
    exactly = run_code(pool, forging(*[png(1, 1)] * MAX_IMAGES))
    assert exactly["exit"] == 0 and len(exactly["images"]) == MAX_IMAGES


def test_images_past_the_byte_bound_end_the_request(pool: PoolClient) -> None:
    # A valid start and trailing bytes: the bound, not the PNG check, refuses the second.
    big = f"big = {png(1, 1)!r} + bytes({MAX_IMAGE_BYTES // 2})\n"
    result = run_code(pool, FORGE + big + "image(big)\nimage(big)\n")
    assert_pool_error(result, f"more than {MAX_IMAGE_BYTES} bytes")
    serves(pool)


def test_image_data_that_is_not_text_ends_the_request(pool: PoolClient) -> None:
    result = run_code(pool, FORGE + "forge({'type': 'image', 'data': [1, 2]})\n")
    assert_pool_error(result, "base64")
