"""The JVM side of the compatibility tests (issue 17): builds tests/java with Maven once per
session (Kafka 4.4's client, Streams and command-line tools come with its classpath) and runs
its programs and Kafka's tool classes against a test's broker.

A failing run reports the command, its whole output (client logs at WARN, via slf4j-simple)
and, through conftest.py, the broker log tail.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
JAVA_DIR = REPO / "tests" / "java"
BUILD_TIMEOUT_S = 900


def maven_classpath(project_dir, goals=()):
    """Runs `mvn <goals> dependency:build-classpath` in `project_dir` (a Maven project of
    tests/); returns its dependencies' classpath."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        pytest.fail("java and mvn are needed for the Java-client tests (scripts/test-all "
                    "installs them)", pytrace=False)
    cp_file = project_dir / "target" / "classpath.txt"
    cmd = ["mvn", "-q", "-B", *goals, "dependency:build-classpath",
           f"-Dmdep.outputFile={cp_file}"]
    proc = subprocess.run(cmd, cwd=project_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=BUILD_TIMEOUT_S)
    if proc.returncode != 0:
        pytest.fail(f"`{' '.join(cmd)}` in {project_dir} failed ({proc.returncode}):\n"
                    f"{proc.stdout[-6000:]}", pytrace=False)
    return cp_file.read_text().strip()


def build_classpath():
    """`mvn package` in tests/java; returns the classpath (its jar first, then Kafka's)."""
    classpath = maven_classpath(JAVA_DIR, goals=("package",))
    jar = JAVA_DIR / "target" / "sluice-java-compat-0.1.0.jar"
    return f"{jar}:{classpath}"


class JavaRun:
    def __init__(self, cmd, returncode, output, seconds):
        self.cmd, self.returncode, self.output, self.seconds = cmd, returncode, output, seconds

    def report(self):
        return (f"command: {' '.join(self.cmd)}\nexit: {self.returncode} after "
                f"{self.seconds:.1f} s\noutput:\n{self.output[-12000:]}")


def run_java(classpath, main_class, args, timeout=120, stdin=None, env=None):
    """Runs `main_class` with `args`; never raises on a non-zero exit (see `check_java`).
    A run past `timeout` s is killed and reported as a hang (exit None)."""
    cmd = ["java", "-Xss1m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           "-cp", classpath, main_class, *map(str, args)]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))
        code, out = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        code, out = None, out + f"\n=== killed: no exit within {timeout} s (a hang)"
    return JavaRun(cmd, code, out, time.monotonic() - started)


def check_java(run, expect_line=None):
    """Fails the test unless `run` exited 0 (and printed `expect_line`, if given)."""
    if run.returncode != 0 or (expect_line and expect_line not in run.output):
        pytest.fail(run.report(), pytrace=False)
    return run.output
