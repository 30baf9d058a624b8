"""Resolves Apache RocketMQ's jars from Maven Central into a cache outside the repository, for
the interop tests, the Java agent's tests and the benchmarks.

    python tools/rocketmq_jars.py [--cache DIR] [VERSION:ARTIFACTS ...]

Each ``VERSION:ARTIFACTS`` (``5.3.3:namesrv,broker,controller,tools,client,proxy``) becomes
``DIR/VERSION/lib``: the named ``org.apache.rocketmq`` artifacts and every runtime dependency,
copied by ``mvn dependency:copy-dependencies`` from a generated ``pom.xml``. A directory already
complete (its marker file names the same artifacts) is left alone, so a second run costs
nothing. ``DIR`` defaults to ``$ROCKETMQ_JAR_CACHE`` or ``~/.cache/rocketmq-routepush``.

Prints one ``VERSION DIR/VERSION/lib`` line per version, for scripts to read.

``--agent`` then builds the route-push Java agent (``bridges/java-agent``) with its JUnit tests,
which attach to real 5.x and 4.9.x clients and, when a set names ``proxy`` (``5.3.3:proxy,...``),
to that real proxy's route cache. ``--if-possible`` (what a developer's test run uses) notes and
skips instead of failing where Maven or a JDK is missing or Maven Central cannot be reached; with
``CI`` set every failure fails.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AGENT_POM = ROOT / "bridges" / "java-agent" / "pom.xml"

DEFAULT_SETS = (
    "5.3.3:namesrv,broker,controller,tools,client,proxy",
    "5.2.0:client-java",
    "4.9.7:client",
)
"""The server side and the remoting client of 5.x, the gRPC Java client (a self-contained jar of
its own versions), the 4.9.x remoting client."""
MARKER = ".resolved"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/xsd/maven-4.0.0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.routepush</groupId>
  <artifactId>rocketmq-jars-{version}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""

DEP = """    <dependency>
      <groupId>org.apache.rocketmq</groupId>
      <artifactId>rocketmq-{name}</artifactId>
      <version>{version}</version>
    </dependency>"""


def default_cache() -> Path:
    env = os.environ.get("ROCKETMQ_JAR_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rocketmq-routepush"


def parse_set(text: str) -> tuple[str, tuple[str, ...]]:
    version, sep, names = text.partition(":")
    artifacts = tuple(n.strip() for n in names.split(",") if n.strip())
    if not sep or not version or not artifacts:
        raise argparse.ArgumentTypeError(f"expected VERSION:ARTIFACT[,ARTIFACT...], got {text!r}")
    return version, artifacts


def resolve(cache: Path, version: str, artifacts: tuple[str, ...]) -> Path:
    """``cache/version/lib`` holding ``artifacts`` and their runtime dependencies."""
    home = cache / version
    lib = home / "lib"
    marker = lib / MARKER
    wanted = ",".join(sorted(artifacts))
    if marker.exists() and marker.read_text().strip() == wanted:
        return lib
    home.mkdir(parents=True, exist_ok=True)
    deps = "\n".join(DEP.format(name=a, version=version) for a in sorted(artifacts))
    (home / "pom.xml").write_text(POM.format(version=version, deps=deps))
    subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "-f",
            str(home / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={lib}",
        ],
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=1800,
    )
    marker.write_text(wanted + "\n")
    return lib


def build_agent(legacy_lib: Path | None, proxy_lib: Path | None = None) -> None:
    """``mvn package`` of the Java agent: its JUnit tests, then the jar."""
    command = ["mvn", "-q", "-B", "-f", str(AGENT_POM), "package"]
    if legacy_lib is not None:
        command.append(f"-Droutepush.legacyLib={legacy_lib}")
    if proxy_lib is not None:
        command.append(f"-Droutepush.proxyLib={proxy_lib}")
    subprocess.run(command, check=True, stdin=subprocess.DEVNULL, timeout=1800)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=None, help="cache directory")
    parser.add_argument("--agent", action="store_true", help="then build and test the agent")
    parser.add_argument(
        "--if-possible", action="store_true", help="skip (exit 0) where Java or Maven is missing"
    )
    parser.add_argument("sets", nargs="*", type=parse_set, help="VERSION:ARTIFACT[,...]")
    args = parser.parse_args(argv)
    lenient = args.if_possible and not os.environ.get("CI")
    missing = [tool for tool in ("mvn", "javac") if shutil.which(tool) is None]
    if missing:
        if lenient:
            print(f"skipped: no {', '.join(missing)} on PATH (Java tests will skip)", flush=True)
            return 0
        raise SystemExit(f"{', '.join(missing)} not found: a JDK and Maven are needed")
    cache = (args.cache or default_cache()).expanduser()
    sets = args.sets or [parse_set(s) for s in DEFAULT_SETS]
    libs = {}
    try:
        for version, artifacts in sets:
            libs[version] = resolve(cache, version, artifacts)
            print(f"{version} {libs[version]}", flush=True)
        if args.agent:
            legacy = [lib for version, lib in libs.items() if version.startswith("4.")]
            proxy = [libs[version] for version, names in sets if "proxy" in names]
            build_agent(legacy[0] if legacy else None, proxy[0] if proxy else None)
            print(f"agent {AGENT_POM.parent / 'target' / 'rocketmq-routepush-agent.jar'}")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        if lenient and not args.agent:
            print(f"skipped: {error} (Java interop tests will skip)", flush=True)
            return 0
        raise SystemExit(f"failed: {error}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
