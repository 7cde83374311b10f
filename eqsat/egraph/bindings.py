"""egglog's compiled bindings, loaded without the ``egglog`` package's Python layer: a saturation
worker starts sooner (see :func:`load_bindings`)."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

BINDINGS = "egglog.bindings"


def load_bindings() -> ModuleType:
    """egglog's compiled bindings, the only part of egglog this project drives. ``import
    egglog.bindings`` first runs the ``egglog`` package, whose high-level API (and the ``black``
    formatter it imports) is never used here: 0.15-0.20 s of every saturation worker's start,
    against 0.05 s for the extension alone. Registered under its own name, so a later ``import
    egglog`` reuses it; the plain import where the extension is not found beside the package."""
    if BINDINGS in sys.modules:
        return sys.modules[BINDINGS]
    package = importlib.util.find_spec("egglog")
    folder = package.submodule_search_locations if package is not None else None
    for path in folder or ():
        found = importlib.machinery.FileFinder(path, (importlib.machinery.ExtensionFileLoader,
                                                      importlib.machinery.EXTENSION_SUFFIXES)).find_spec(BINDINGS)
        if found is not None and found.loader is not None:
            module = importlib.util.module_from_spec(found)
            sys.modules[BINDINGS] = module
            found.loader.exec_module(module)
            return module
    import egglog.bindings

    return egglog.bindings

