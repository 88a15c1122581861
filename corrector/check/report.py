"""Findings and the formats they are written in: text, json, github, sarif.

    text    path:line:col: 因该 → 应该 (pinyin, 0.96)          one line per finding
    json    one array of objects {path, line, column, source, target, word, suggestion, kind,
            confidence, fixed}
    github  ::warning file=...,line=...,col=...,title=...::message (GitHub Actions annotations)
    sarif   SARIF 2.1.0: one run, a rule per kind of error, a result per finding with its region
            (startLine/startColumn/endColumn, columns in Unicode code points) and its fix

Columns are 1-based and count characters; in a .docx file the "line" is the paragraph number.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

FORMATS = ("text", "json", "github", "sarif")
KINDS = {
    "pinyin": "a character replaced by one that sounds alike (同音/近音字)",
    "shape": "a character replaced by one that looks alike (形近字)",
    "other": "a character replaced by another",
}
TOOL = "electra-csc"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


@dataclass
class Finding:
    """One corrected character: where it is, what it is, what it should be. `word` and
    `suggestion` are the word around it as written and as corrected, for the reader; `ref` is
    what --fix needs to reach it in a .docx file."""

    path: str
    line: int
    column: int
    source: str
    target: str
    kind: str
    confidence: float
    word: str = ""
    suggestion: str = ""
    fixed: bool = False
    ref: Any = field(default=None, repr=False, compare=False)

    @property
    def message(self) -> str:
        return f"{self.word or self.source} → {self.suggestion or self.target} ({self.kind}, {self.confidence:.2f})"

    def to_dict(self) -> dict:
        return {"path": self.path, "line": self.line, "column": self.column, "source": self.source,
                "target": self.target, "word": self.word, "suggestion": self.suggestion, "kind": self.kind,
                "confidence": round(self.confidence, 4), "fixed": self.fixed}


def text_line(finding: Finding) -> str:
    return f"{finding.path}:{finding.line}:{finding.column}: {finding.message}" + (" [fixed]" if finding.fixed else "")


def _escape_data(value: str) -> str:
    """A workflow command's message: %, CR and LF escaped (GitHub's toolkit rules)."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    """A workflow command's property value: also ':' and ','."""
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def github_line(finding: Finding) -> str:
    properties = {"file": Path(finding.path).as_posix(), "line": finding.line, "col": finding.column,
                  "endColumn": finding.column, "title": "Chinese spelling"}
    listed = ",".join(f"{key}={_escape_property(str(value))}" for key, value in properties.items())
    return f"::warning {listed}::{_escape_data(finding.message)}"


def artifact_uri(path: str) -> str:
    """A file's SARIF artifact URI: a percent-encoded POSIX path relative to the current
    directory (code scanning resolves it against the checkout) where the file is under it, else
    a file: URI."""
    target = Path(path)
    if target.is_absolute():
        try:
            target = target.relative_to(Path.cwd())
        except ValueError:
            return target.as_uri()
    return quote(target.as_posix())


def sarif_log(findings: list[Finding], version: str) -> dict:
    """The SARIF 2.1.0 log of `findings`."""
    rules = [{"id": f"chinese-spelling/{kind}", "name": f"ChineseSpelling{kind.capitalize()}",
              "shortDescription": {"text": description},
              "defaultConfiguration": {"level": "warning"}} for kind, description in KINDS.items()]
    index = {kind: i for i, kind in enumerate(KINDS)}
    results = []
    for finding in findings:
        kind = finding.kind if finding.kind in index else "other"
        region = {"startLine": finding.line, "startColumn": finding.column, "endColumn": finding.column + 1}
        location = {"artifactLocation": {"uri": artifact_uri(finding.path)}, "region": region}
        results.append({
            "ruleId": f"chinese-spelling/{kind}",
            "ruleIndex": index[kind],
            "level": "warning",
            "message": {"text": finding.message},
            "locations": [{"physicalLocation": location}],
            "fixes": [{"description": {"text": f"{finding.source} → {finding.target}"},
                       "artifactChanges": [{"artifactLocation": location["artifactLocation"],
                                            "replacements": [{"deletedRegion": region,
                                                              "insertedContent": {"text": finding.target}}]}]}],
            "properties": {"confidence": round(finding.confidence, 4)},
        })
    driver = {"name": TOOL, "version": version, "rules": rules}
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", "results": results}]}


class Reporter:
    """Writes findings as they come (text, github) or all at the end (json, sarif)."""

    def __init__(self, fmt: str, out: TextIO, version: str) -> None:
        self.format, self.out, self.version = fmt, out, version
        self.findings: list[Finding] = []

    def add(self, findings: list[Finding]) -> None:
        self.findings.extend(findings)
        if self.format in ("text", "github"):
            render = text_line if self.format == "text" else github_line
            for finding in findings:
                self.out.write(render(finding) + "\n")
            self.out.flush()

    def finish(self) -> None:
        if self.format == "json":
            json.dump([f.to_dict() for f in self.findings], self.out, ensure_ascii=False, indent=1)
            self.out.write("\n")
        elif self.format == "sarif":
            json.dump(sarif_log(self.findings, self.version), self.out, ensure_ascii=False, indent=1)
            self.out.write("\n")
        self.out.flush()
