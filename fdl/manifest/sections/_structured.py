"""floDl's structured sections (``ddp:``, ``training:``, ``output:``) as data.

A nested manifest and its presets may set these sections; fdl turns them into
flags for the entry. Each row says which key maps to which flag, how the value
is written, and the order flags are emitted in (floDl's order, so existing
floDl projects see the same command lines).
"""

from __future__ import annotations

from fdl.manifest.schema import AnyValue, Bool, Enum, Float, Int, ListOf, Obj, OneOf, Spec, Str

__all__ = ["FIELDS", "SECTIONS", "StructuredField", "section_spec"]


class StructuredField:
    """One key of a structured section.

    Attributes:
        section: ``ddp``, ``training`` or ``output``.
        key: The key in that section.
        flag: The entry flag it becomes; None when accepted but not passed.
        spec: The value's schema.
        style: How the value is written: ``value`` (``--flag VALUE``),
            ``switch`` (``--flag`` when true), ``list`` (comma-joined) or
            ``pair`` (``slow_rank:ratio``).
        description: Shown in the JSON Schema and help.
    """

    __slots__ = ("description", "flag", "key", "section", "spec", "style")

    # A plain class: dataclasses costs ~9 ms of import on every manifest load.
    def __init__(
        self,
        section: str,
        key: str,
        flag: str | None,
        spec: Spec,
        style: str = "value",
        description: str = "",
    ) -> None:
        self.section = section
        self.key = key
        self.flag = flag
        self.spec = spec
        self.style = style
        self.description = description


_SPEED_HINT = Obj(
    {
        "slow_rank": Int("Rank of the slow device.", minimum=0),
        "ratio": Float("Its speed relative to the others."),
    },
    description="A slower device: passed as --speed-hint RANK:RATIO.",
    required=("slow_rank", "ratio"),
)

SECTIONS = ("ddp", "training", "output")

# Emission order is the table order.
FIELDS: tuple[StructuredField, ...] = (
    StructuredField("ddp", "mode", "--mode", Str(), description="DDP mode."),
    StructuredField("ddp", "policy", "--policy", Str(), description="Synchronisation policy."),
    StructuredField("ddp", "backend", "--backend", Str(), description="Communication backend."),
    StructuredField(
        "ddp", "anchor", "--anchor", OneOf(Int(minimum=0), Enum(["auto"])), description="auto or N."
    ),
    StructuredField("ddp", "max_anchor", "--max-anchor", Int(minimum=0)),
    StructuredField("ddp", "overhead_target", "--overhead-target", Float()),
    StructuredField("ddp", "divergence_threshold", "--divergence-threshold", Float()),
    StructuredField("ddp", "max_batch_diff", "--max-batch-diff", AnyValue()),
    StructuredField("ddp", "max_grad_norm", "--max-grad-norm", Float()),
    StructuredField("ddp", "snapshot_timeout", "--snapshot-timeout", Int(minimum=0)),
    StructuredField("ddp", "checkpoint_every", "--checkpoint-every", Int(minimum=0)),
    StructuredField("ddp", "progressive", "--progressive", AnyValue()),
    StructuredField("ddp", "speed_hint", "--speed-hint", _SPEED_HINT, style="pair"),
    StructuredField("ddp", "partition_ratios", "--partition-ratios", ListOf(Float()), "list"),
    StructuredField("ddp", "lr_scale_ratio", "--lr-scale-ratio", Float()),
    StructuredField("ddp", "timeline", "--timeline", Bool(), style="switch"),
    StructuredField("training", "epochs", "--epochs", Int(minimum=0)),
    StructuredField("training", "batch_size", "--batch-size", Int(minimum=1)),
    StructuredField("training", "batches_per_epoch", "--batches", Int(minimum=1)),
    StructuredField("training", "lr", "--lr", Float(), description="Learning rate."),
    StructuredField("training", "seed", "--seed", Int(minimum=0)),
    StructuredField("output", "dir", "--output", Str(), description="Output directory."),
    StructuredField(
        "output",
        "timeline",
        None,
        Bool(),
        description="Accepted for floDl compatibility; not passed (use ddp.timeline).",
    ),
    StructuredField("output", "monitor", "--monitor", Int(minimum=0, maximum=65535)),
)

_DESCRIPTIONS = {
    "ddp": "Distributed training settings, passed to the entry as flags (--mode, --policy, ...).",
    "training": "Training settings, passed as --epochs, --batch-size, --batches, --lr, --seed.",
    "output": "Output settings, passed as --output DIR and --monitor PORT.",
}


def _describe(row: StructuredField) -> str:
    passed = f"Passed as {row.flag}." if row.flag else ""
    return " ".join(part for part in (row.description, passed) if part)


def section_spec(section: str) -> Obj:
    """The schema of one structured section."""
    fields: dict[str, Spec] = {}
    for row in FIELDS:
        if row.section == section:
            if not row.spec.description:
                row.spec.description = _describe(row)
            fields[row.key] = row.spec
    return Obj(fields, description=_DESCRIPTIONS[section])
