"""bench.json as markdown: the environment, then one table per section (figure | baseline | ratio)."""

from __future__ import annotations

from typing import Any


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
    return str(v)


def cell(v: Any) -> str:
    """A table cell: a pipe in the text would split it."""
    return fmt(v).replace("|", "\\|")


def environment_lines(env: dict[str, Any]) -> list[str]:
    pk = env.get("packages", {})
    git = env.get("git") or {}
    return [
        f"- CPU: {env.get('cpu_model')}, {env.get('logical_cpus')} logical CPUs, affinity {env.get('affinity_cpus')}"
        f" ({env.get('affinity')}), load average {fmt((env.get('load_avg') or [None])[0])}",
        f"- threads: torch {fmt(env.get('torch_threads'))}, onnxruntime (VAD) {env.get('onnxruntime_vad_threads')}"
        + (f", env {env['thread_env']}" if env.get("thread_env") else ""),
        f"- python {env.get('python')}; " + ", ".join(f"{k} {v}" for k, v in pk.items() if v),
        f"- git {git.get('commit', '-')[:12]}{' (uncommitted changes)' if git.get('dirty') else ''}; "
        f"host sha256 {env.get('hostname_sha256')}",
    ]


def section_lines(name: str, sec: dict[str, Any]) -> list[str]:
    lines = [f"## {name}", ""]
    if "skipped" in sec:
        return lines + [f"skipped: {sec['skipped']}", ""]
    if "error" in sec:
        return lines + [f"error: {sec['error']}", ""]
    lines += [
        "| figure | value | unit | baseline | baseline value | ratio | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sec.get("rows", []):
        lines.append(
            "| "
            + " | ".join(
                cell(r[k])
                for k in ("what", "value", "unit", "baseline", "baseline_value", "ratio", "note")
            )
            + " |"
        )
    for (
        k,
        v,
    ) in sec.items():  # parts of a section that could not run (e.g. torch, piper, client processes)
        if isinstance(v, dict) and "skipped" in v:
            lines.append(f"\n{k}: skipped: {v['skipped']}")
        elif isinstance(v, str) and v.startswith("skipped"):
            lines.append(f"\n{k}: {v}")
    return lines + ["", f"({sec.get('section_wall_s', 0):.1f} s)", ""]


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"# fdeval bench{' (--quick)' if result.get('quick') else ''}",
        "",
        f"`{' '.join(result['command'])}`, started {result['started_utc']}, "
        f"{fmt(result.get('wall_s'))} s in all",
        "",
        *environment_lines(result["environment"]),
        "",
    ]
    for name in result["sections"]:
        lines += section_lines(name, result[name])
    return "\n".join(lines)
