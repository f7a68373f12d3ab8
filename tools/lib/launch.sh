#!/usr/bin/env bash
# Shared launcher for the commands in tools/.
#
#   tools/lib/launch.sh MODULE MAIN_CLASS [ARGS...]
#
# Picks the JDK (tools/lib/jdk.sh: JAVA_HOME, then /usr/lib/jvm; one line and exit 2 if none fits), builds the
# project with it on first use (and again only when a source file or a pom changed since the last build, or the
# build was made by another JDK), then runs MAIN_CLASS of MODULE with the module's classes and dependencies on the
# class path. Works from any current directory. Extra JVM options can be passed in TNSR_JAVA_OPTS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
source "$ROOT/tools/lib/jdk.sh"
tnsr_find_jdk
# Maven, the JVMs started here and every child they start (stages, benchmark forks, the perf gate's reference
# build) use this JDK.
export JAVA_HOME="$TNSR_JDK"
JAVA="$TNSR_JDK/bin/java"
# Java 17 decodes command-line arguments with the locale's charset: make sure it is UTF-8.
case "${LC_ALL:-${LC_CTYPE:-${LANG:-}}}" in
  *UTF-8*|*utf8*|*UTF8*|*utf-8*) ;;
  *) export LC_ALL=C.UTF-8 ;;
esac
MODULE="$1"; shift
MAIN="$1"; shift

STAMP="$ROOT/.build/stamp"
LOCK="$ROOT/.build/lock"
mkdir -p "$ROOT/.build"

# The class-file version of the engine's memory access, which the build compiles for the JDK it runs on (17: the
# ByteBuffer sources, 22+: the MemorySegment ones): another JDK's build is rebuilt from clean.
built_for() {
  local cls="$ROOT/engine/target/classes/io/tnsr/engine/memory/Region.class"
  [ -f "$cls" ] && echo $(( $(od -An -tu1 -j7 -N1 "$cls") - 44 ))
}

needs_build() {
  [ -f "$STAMP" ] || return 0
  [ -f "$ROOT/$MODULE/target/classpath.txt" ] || return 0
  [ "$(built_for)" = "$TNSR_JDK_MAJOR" ] || return 0
  local newer
  newer=$(find "$ROOT/pom.xml" "$ROOT/wire" "$ROOT/engine" "$ROOT/perf" \
            \( -path '*/target' -prune \) -o \( -type f \( -path '*/src/*' -o -name pom.xml \) -newer "$STAMP" -print \) \
            2>/dev/null | head -n 1)
  [ -n "$newer" ]
}

if needs_build; then
  (
    flock -w 900 9 || { echo "tools: timed out waiting for another build to finish ($LOCK)" >&2; exit 1; }
    if needs_build; then
      GOALS=(package)
      if [ -n "$(built_for)" ] && [ "$(built_for)" != "$TNSR_JDK_MAJOR" ]; then
        GOALS=(clean package)
      fi
      echo "tools: building the project with JDK $TNSR_JDK_MAJOR (first use or sources changed; takes about a minute)..." >&2
      touch "$STAMP.next"
      if ! mvn -q -B -f "$ROOT/pom.xml" -DskipTests -Dmaven.test.skip=true "${GOALS[@]}" >"$ROOT/.build/build.log" 2>&1; then
        echo "tools: build failed; see $ROOT/.build/build.log" >&2
        tail -n 30 "$ROOT/.build/build.log" >&2
        exit 1
      fi
      mv "$STAMP.next" "$STAMP"
    fi
  ) 9>"$LOCK"
fi

CP="$ROOT/$MODULE/target/classes:$(cat "$ROOT/$MODULE/target/classpath.txt")"
# Keep these flags in step with <tnsr.jvm.flags> in the root pom.xml. PerMethodTrapLimit: C2 adds up the deoptimization
# traps recorded in every method it inlines into one compilation, and past the limit (default 100) it stops speculating
# on types for the whole compilation; a vector kernel inlines hundreds of shared Vector API methods, so a few traps in
# those (timing-dependent, while the JIT warms up) could push a kernel over the limit and make it box every vector,
# for good (docs/engine-speed.md, "A C2 hazard handled by flags"). The limit per bytecode still stops a real
# recompilation loop.
# vector-helpers.compile: the small methods that pass vectors are always inlined (see the file).
JVM_FLAGS=(--add-modules jdk.incubator.vector --enable-native-access=ALL-UNNAMED
  --add-opens java.base/java.nio=ALL-UNNAMED --add-opens java.base/sun.nio.ch=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED -XX:+UseParallelGC
  -XX:CompileCommand=quiet -XX:CompileCommandFile=$ROOT/tools/lib/vector-helpers.compile
  -XX:CompileCommand=dontinline,io.tnsr.engine.model.*::matvec
  -XX:CompileCommand=dontinline,io.tnsr.engine.model.*::matmulTokens
  -XX:CompileCommand=dontinline,io.tnsr.engine.model.*::subSums
  -XX:CompileCommand=dontinline,io.tnsr.engine.model.*::wholePanels -XX:PerMethodTrapLimit=10000
  -Dtnsr.home="$ROOT" -Dtnsr.classpath="$CP")
# JDK 24 and later warn once per JVM when Agrona and the Disruptor use sun.misc.Unsafe's memory access (pom.xml,
# profile jdk-24-and-later, passes the same to tests).
if [ "$TNSR_JDK_MAJOR" -ge 24 ]; then
  JVM_FLAGS+=(--sun-misc-unsafe-memory-access=allow)
fi
# F32, BF16 and quantized weights (every type but F16) are repacked onto the heap at load: let the heap grow to 75% of RAM (a limit, not a
# reservation) instead of the JVM's default 25%, so that a model that fits in memory loads.
JVM_FLAGS+=(-XX:MaxRAMPercentage=75)
# F32 and quantized weights live on the heap and decode streams them once per token: back the heap with transparent huge
# pages where the kernel offers them (mode "always" or "madvise"; with "never" the flag would only print a warning).
# F32 decode of stories110M: 67.9 / 68.2 -> 69.9 / 69.7 tokens/s, and steadier (docs/engine-speed.md).
# The KV cache lives off the heap, in slabs the C library allocates (KvCachePool): glibc 2.35 and later take huge pages for
# them too when told so (older ones ignore the setting). A new slab's first touch then costs about a third as much.
if grep -qE '\[(always|madvise)\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
  JVM_FLAGS+=(-XX:+UseTransparentHugePages)
  export GLIBC_TUNABLES="${GLIBC_TUNABLES:+$GLIBC_TUNABLES:}glibc.malloc.hugetlb=1"
fi
# Progress bars are drawn only on a terminal (io.tnsr.engine.util.TaskProgress): the filter below makes the JVM's stderr a
# pipe, so say here whether ours is a terminal, and how wide it is.
if [ -t 2 ]; then
  export TNSR_STDERR_TTY=1
  TNSR_COLUMNS=$(tput cols 2>/dev/null || echo 100)
  export TNSR_COLUMNS
fi
# The incubator warning goes to stderr once per JVM; keep it out of users' way unless asked for.
exec "$JAVA" "${JVM_FLAGS[@]}" ${TNSR_JAVA_OPTS:-} -cp "$CP" "$MAIN" "$@" 2> >(grep -v --line-buffered '^WARNING: Using incubator modules' >&2)
