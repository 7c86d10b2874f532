"""What a Windows compile of an extension is, shared by everything that runs the Windows
compilers under wine (check --windows, the cross build, verify's load step): each unit's command
with torch's and setuptools' Windows flags, compiler and link.exe output read back, and which
torch DLL exports each stable C symbol. It runs programs only through the runner it is given
(toolchain.wine_server)."""
