"""verify's load step: a win_amd64 stable wheel loaded under wine against torch's real Windows
DLLs, its ops asked of torch's own dispatcher (docs/windows-user.md says what that proves)."""
