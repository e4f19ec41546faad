"""Public system data the standard library reads: the table of MIME types
(/etc/mime.types and the other mimetypes.knownfiles) and the operating system's
name (/etc/os-release, or /usr/lib/os-release).

mimetypes reads every one of those files that exists, and raises when it cannot
read one; freedesktop_os_release() raises when it can read neither.
"""
import mimetypes
import platform

print(mimetypes.guess_type("photo.png"), mimetypes.guess_type("package.deb"))
print(mimetypes.guess_extension("application/json"))
try:
    release = platform.freedesktop_os_release()
except OSError as error:  # a system without either file
    print(type(error).__name__)
else:
    print(release.get("ID"), release.get("VERSION_ID"))
