#!/usr/bin/env python3
"""Keeps, from bundles that real agent CLIs wrote, one stream per agent and version as a test
fixture: crates/formats/tests/fixtures/agents/streams/<agent>@<version>.stream, listed with its sandbox
roots and source in index.toml there. The default test tier reads every one with its agent's
adapter (tests/suite/agents.rs: every_agent_and_version_s_recorded_stream_reads_cleanly).

    scripts/record-agent-streams.py [BUNDLE_ROOT...]   (default: target/test-work, which
                                                        `scripts/test.sh --all` fills)

An agent and version already kept is kept as it is; delete its file to record it again. A run
on the scripted model's aggressive play is preferred (it runs, edits and deletes), then any."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "crates/formats/tests/fixtures/agents/streams"


def bundles(roots):
    for root in roots:
        for manifest in sorted(Path(root).rglob("bundle.json")):
            d = manifest.parent
            if (d / "agent.jsonl").is_file():
                yield d, json.loads(manifest.read_text())


def toml_str(s):
    return json.dumps(s)  # a TOML basic string is a JSON string for these values


def main():
    roots = sys.argv[1:] or [str(REPO / "target/test-work")]
    OUT.mkdir(parents=True, exist_ok=True)
    index_path = OUT / "index.toml"
    kept = {}
    if index_path.is_file():
        import tomllib
        kept = tomllib.loads(index_path.read_text())
    # Only agents defined today (an old bundle may name one since renamed).
    defined = {line.split('"')[1] for f in (REPO / "agents").glob("*.toml") for line in f.read_text().splitlines() if line.startswith("id = ")}
    found = {}
    for d, m in bundles(roots):
        agent = m.get("agent", {})
        framework, version, model = agent.get("framework", ""), agent.get("version"), agent.get("model", "")
        if not version or not framework or framework.startswith(("scripted", "sim")):
            continue
        name = framework.split(":")[0].split("@")[0]
        if name not in defined:
            continue
        key = f"{name}@{version}"
        text = (d / "agent.jsonl").read_text(errors="replace")
        if not text.strip():
            continue
        score = (model.endswith("aggressive"), len(text) < 400_000)
        if key not in found or score > found[key][0]:
            found[key] = (score, d, m, text)
    added = []
    for key, (_, d, m, text) in sorted(found.items()):
        if key in kept and (OUT / kept[key]["file"]).is_file():
            continue
        file = f"{key}.stream"
        (OUT / file).write_text(text)
        kept[key] = {
            "file": file,
            "workspace": m["roots"]["workspace"],
            "home": m["roots"]["home"],
            "recorded_from": f"{m['agent']['id']} on {m.get('scenario', {}).get('id', '?') if isinstance(m.get('scenario'), dict) else m.get('scenario', '?')}",
        }
        added.append(key)
    lines = ["# One stream per agent and version, each written by the real CLI on the scripted model.",
             "# Made by scripts/record-agent-streams.py; read by the default test tier.", ""]
    for key in sorted(kept):
        e = kept[key]
        lines.append(f"[{toml_str(key)}]")
        for field in ("file", "workspace", "home", "recorded_from"):
            lines.append(f"{field} = {toml_str(e[field])}")
        lines.append("")
    index_path.write_text("\n".join(lines))
    print(f"kept {len(kept)} streams ({len(added)} new: {', '.join(added) or 'none'}) in {OUT}")


if __name__ == "__main__":
    main()
