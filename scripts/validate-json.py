"""Validates JSON documents against a JSON Schema (draft 2020-12).

    python scripts/validate-json.py SCHEMA FILE...

Each FILE holds one JSON document, or one per line (.jsonl). Prints one line per invalid
document and exits 1 if any is invalid, 0 otherwise.
"""
import json
import sys

from jsonschema import Draft202012Validator

schema = json.load(open(sys.argv[1]))
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema)
failures = 0
for path in sys.argv[2:]:
    text = open(path).read()
    documents = [json.loads(line) for line in text.splitlines() if line.strip()] if path.endswith(".jsonl") else [json.loads(text)]
    for document in documents:
        for error in validator.iter_errors(document):
            failures += 1
            print(f"{path}: {document.get('id', '?') if isinstance(document, dict) else '?'}: {error.json_path}: {error.message}")
sys.exit(1 if failures else 0)
