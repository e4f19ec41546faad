import base64
import binascii
import bz2
import hashlib
import hmac
import lzma
import struct
import zlib

data = b"The quick brown fox jumps over the lazy dog" * 10
print(hashlib.sha256(data).hexdigest())
print(hashlib.md5(b"").hexdigest(), hashlib.blake2b(b"x", digest_size=8).hexdigest())
print(hashlib.sha3_256(b"abc").hexdigest()[:16], hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 1000).hex()[:16])
print(hmac.new(b"key", b"msg", "sha1").hexdigest())
comp = zlib.compress(data, 9)
print(len(comp), zlib.decompress(comp) == data, zlib.crc32(data), zlib.adler32(data))
print(bz2.decompress(bz2.compress(data)) == data, lzma.decompress(lzma.compress(data)) == data)
packed = struct.pack("<iHd4sq?", -1, 65535, 2.5, b"abcd", 2**40, True)
print(packed.hex(), struct.calcsize("<iHd4sq?"), struct.unpack("<iHd4sq?", packed))
print(struct.pack(">I", 0xDEADBEEF), int.from_bytes(b"\x01\x02", "little"), (1024).to_bytes(4, "big"))
print(base64.b64encode(b"\xffpynox"), base64.b32decode(b"MFRGG==="), binascii.hexlify(b"\x00\x10", "-"))
