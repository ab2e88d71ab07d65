"""Write the JSON Schemas of llm-eval.yaml, ship-criteria.yaml and report.json.

The schemas are made by `llm_eval.json_schemas` from the loaders' key tables and the
report's checks; this writes them where they are committed: `llm_eval/scaffold/schemas/`
(package data, which `llm-eval init` copies beside the config) and `docs/schemas/`
(published with the site). `tests/test_json_schemas.py` fails when a committed file
differs from what the code makes: run this after changing a loader's keys.

    python scripts/build_schemas.py
"""

from __future__ import annotations

from pathlib import Path

from llm_eval.json_schemas import SCHEMAS, schema_text

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "llm_eval" / "scaffold" / "schemas", ROOT / "docs" / "schemas")


def main() -> None:
    for folder in FOLDERS:
        folder.mkdir(exist_ok=True)
        for name in SCHEMAS:
            (folder / name).write_text(schema_text(name), encoding="utf-8")
            print(f"Wrote {(folder / name).relative_to(ROOT)}")


if __name__ == "__main__":
    main()
