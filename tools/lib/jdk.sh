# Finds the JDK the tools/ commands build and run with; sourced by tools/lib/launch.sh and .ci/run.
#
#   source tools/lib/jdk.sh; tnsr_find_jdk    # sets TNSR_JDK (a JDK home) and TNSR_JDK_MAJOR, or exits 2
#
# Supported: JDK 17, and JDK 22 or later (the Vector API reads memory through ByteBuffers on 17 and through
# MemorySegments from 22 on; on 19-21 only through a preview API). Looked for in order: JAVA_HOME (used as given,
# or refused), then the JDKs under /usr/lib/jvm (TNSR_JDK_DIRS overrides the list), then `java` on the PATH; among
# those found, the preferred release (17) first, then the newest.

# The release the tools prefer when several are installed: the faster one, measured side by side (docs/jdk.md).
TNSR_JDK_PREFERRED=17
TNSR_JDK_WORKS="JDK 17, or JDK 22 or later"

# The major version of the JDK at $1 (from its release file, else from java -version), or nothing.
tnsr_jdk_major() {
  local home="$1" v=""
  [ -x "$home/bin/java" ] || return 0
  if [ -f "$home/release" ]; then
    v=$(sed -n 's/^JAVA_VERSION="\([0-9][0-9.]*\).*/\1/p' "$home/release" | head -n 1)
  fi
  if [ -z "$v" ]; then
    v=$("$home/bin/java" -version 2>&1 | sed -n 's/.* version "\([0-9][0-9.]*\).*/\1/p' | head -n 1)
  fi
  v="${v#1.}" # 1.8.0 -> 8
  echo "${v%%.*}"
}

tnsr_jdk_supported() {
  [ -n "$1" ] && { [ "$1" -eq 17 ] || [ "$1" -ge 22 ]; }
}

tnsr_jdk_refuse() {
  echo "tnsr: $1; tnsr runs on $TNSR_JDK_WORKS: set JAVA_HOME to one (JDKs under /usr/lib/jvm are found by themselves)" >&2
  exit 2
}

tnsr_find_jdk() {
  local home major best="" best_major=""
  if [ -n "${JAVA_HOME:-}" ]; then
    major=$(tnsr_jdk_major "$JAVA_HOME")
    if [ -z "$major" ]; then
      tnsr_jdk_refuse "JAVA_HOME=$JAVA_HOME has no bin/java"
    elif ! tnsr_jdk_supported "$major"; then
      tnsr_jdk_refuse "JAVA_HOME=$JAVA_HOME is JDK $major"
    elif [ ! -x "$JAVA_HOME/bin/javac" ]; then
      tnsr_jdk_refuse "JAVA_HOME=$JAVA_HOME is a JRE (no javac) and the project is built from source"
    fi
    TNSR_JDK="$JAVA_HOME"; TNSR_JDK_MAJOR="$major"
    return 0
  fi
  local usable
  while read -r major home usable; do
    [ "$usable" = yes ] || continue
    if [ -z "$best" ] || { [ "$best_major" -ne "$TNSR_JDK_PREFERRED" ] \
        && { [ "$major" -eq "$TNSR_JDK_PREFERRED" ] || [ "$major" -gt "$best_major" ]; }; }; then
      best="$home"; best_major="$major"
    fi
  done < <(tnsr_scan_jdks with-path)
  if [ -z "$best" ]; then
    local found
    found=$(tnsr_scan_jdks with-path | awk '{printf "%sJDK %s (%s)", (NR > 1 ? ", " : ""), $1, $2}')
    tnsr_jdk_refuse "no suitable JDK found (JAVA_HOME unset; found: ${found:-none})"
  fi
  TNSR_JDK="$best"; TNSR_JDK_MAJOR="$best_major"
}

# "MAJOR HOME yes|no" for each JDK under /usr/lib/jvm (or TNSR_JDK_DIRS), and with $1 = with-path the one of
# `java` on the PATH, each home once: yes when tnsr can build and run with it.
tnsr_scan_jdks() {
  local home major seen="" path_java=""
  if [ "${1:-}" = with-path ]; then
    path_java=$(command -v java 2>/dev/null || true)
    [ -n "$path_java" ] && path_java=$(dirname "$(dirname "$(readlink -f "$path_java")")")
  fi
  for home in ${TNSR_JDK_DIRS-/usr/lib/jvm/*} $path_java; do
    [ -d "$home" ] || continue
    home=$(readlink -f "$home")
    case " $seen " in *" $home "*) continue ;; esac
    seen="$seen $home"
    major=$(tnsr_jdk_major "$home")
    [ -n "$major" ] || continue
    if tnsr_jdk_supported "$major" && [ -x "$home/bin/javac" ]; then
      echo "$major $home yes"
    else
      echo "$major $home no"
    fi
  done
}

# "MAJOR HOME" for each usable JDK under /usr/lib/jvm (or TNSR_JDK_DIRS), one per release: what .ci/run tests on.
tnsr_list_jdks() {
  tnsr_scan_jdks | awk '$3 == "yes" && !seen[$1]++ {print $1, $2}' | sort -n
}
