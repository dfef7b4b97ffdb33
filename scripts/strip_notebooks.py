"""Strip outputs and execution counts from notebooks, in place: they are committed without them.

    python scripts/strip_notebooks.py NOTEBOOK.ipynb [...]

Exits 1 when it changed a file (so a pre-commit hook stops the commit to let you add the
stripped file), 0 when every notebook was already clean.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def strip(path: Path) -> bool:
    """Remove the outputs of ``path``'s code cells; True when the file changed."""
    text = path.read_text()
    nb = json.loads(text)
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    clean = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if clean != text:
        path.write_text(clean)
        return True
    return False


def main(argv: list[str]) -> int:
    changed = [p for p in argv if strip(Path(p))]
    for p in changed:
        print(f"stripped outputs of {p}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
