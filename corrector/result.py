"""What the corrector returns: the corrected text and one `Edit` per changed character."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Literal

EditKind = Literal["pinyin", "shape", "other"]


@dataclass(frozen=True)
class Edit:
    position: int  # 0-based character offset in the original text
    source: str  # the character found there
    target: str  # the character it was replaced with
    confidence: float  # scorer confidence in [0, 1]
    kind: EditKind = "other"  # confusion relation between source and target

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Result:
    source: str
    target: str
    edits: list[Edit] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"source": self.source, "target": self.target, "edits": [e.to_dict() for e in self.edits]}

    @classmethod
    def unchanged(cls, text: str) -> Result:
        return cls(source=text, target=text, edits=[])

    @classmethod
    def applying(cls, text: str, edits: list[Edit]) -> Result:
        """`text` with one-character `edits` written in (at most one per position), edits sorted."""
        chars = list(text)
        for edit in edits:
            chars[edit.position] = edit.target
        return cls(source=text, target="".join(chars), edits=sorted(edits, key=lambda e: e.position))
