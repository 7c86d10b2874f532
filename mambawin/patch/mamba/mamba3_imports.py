"""mamba3-imports: a broken Mamba3-only kernel stack no longer breaks `import mamba_ssm`.

Why: from v2.3.2, `import mamba_ssm` imports `modules/mamba3.py`, which tries the tilelang MIMO
kernels and the CuTe decode step (quack-kernels, nvidia-cutlass-dsl) inside `except ImportError`.
A stack that is installed but does not load raises something else: tvm-ffi's
    AttributeError: module 'tvm_ffi' has no attribute ...
(state-spaces/mamba#986), or OSError when a DLL is missing on Windows, and then Mamba and Mamba2,
which need none of it, cannot be imported either. The guards catch any Exception instead; Mamba3
(SISO, triton only) still imports, and `Mamba3(is_mimo=True)` and `Mamba3.step` keep upstream's
own assertion that names what to install. An absent module was already fine upstream
(ModuleNotFoundError is an ImportError); on Windows the mamba3 extra holds those requirements.
"""

from __future__ import annotations

import re

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from mambawin.patch.base import Outcome, Patch, PatchContext, Tree

MAMBA3 = "mamba_ssm/modules/mamba3.py"
ANCHOR = "except ImportError:  (after the tilelang and cute mamba3 imports)"
MARK = "# mambawin mamba3-imports: a broken tilelang/tvm-ffi/CuTe install must not break Mamba"
_GUARDS = ("tilelang", "cute")
_GUARD = re.compile(
    r"^(try:\n    from mamba_ssm\.ops\.(tilelang|cute)\.mamba3\.[^\n]+\n)"
    r"except ImportError:[ \t]*$",
    re.MULTILINE,
)
_PATCHED = re.compile(
    r"^try:\n    from mamba_ssm\.ops\.(tilelang|cute)\.mamba3\.[^\n]+\nexcept Exception:  "
    + re.escape(MARK)
    + "$",
    re.MULTILINE,
)


def transform(tree: Tree, ctx: PatchContext) -> Outcome:
    """Widen both optional-kernel guards in modules/mamba3.py to `except Exception`."""
    if not tree.exists(MAMBA3):
        # The v2.3.2 tag still says __version__ = "2.3.1" (and has Mamba3); real 2.3.1 has none.
        if ctx.version < Version("2.3.2"):
            return "not-applicable"
        raise ctx.drift(MAMBA3, ANCHOR)
    text = tree.read(MAMBA3)
    found = {match.group(2) for match in _GUARD.finditer(text)}
    done = {match.group(1) for match in _PATCHED.finditer(text)}
    if done >= set(_GUARDS):
        return "already-applied"
    if found | done != set(_GUARDS):
        raise ctx.drift(MAMBA3, ANCHOR)
    tree.write(MAMBA3, _GUARD.sub(lambda m: f"{m.group(1)}except Exception:  {MARK}", text))
    return "applied"


PATCH = Patch(
    id="mamba3-imports",
    summary="modules/mamba3.py: optional tilelang/CuTe imports guarded by except Exception",
    prevents="AttributeError: module 'tvm_ffi' has no attribute ... (at `import mamba_ssm`)",
    versions=SpecifierSet(">=2.3.1"),  # the v2.3.2 tag says 2.3.1 (upstream-map §1, G17)
    why=(
        "Mamba3's optional kernels fail with AttributeError/OSError, not ImportError, when "
        "installed but unloadable (state-spaces/mamba#986); Mamba/Mamba2 need none of them"
    ),
    files=(MAMBA3,),
    transform=transform,
)
