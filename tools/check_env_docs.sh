#!/bin/bash
# Every SOFTRNIC_* variable the library or the tool reads (getenv in src/)
# (and tools/) is documented in softrnic(1) and in the README's configuration table,
# but those set by softrnic itself for its own processes (INTERNAL).
#   check_env_docs.sh SOURCE_DIR      (ctest docs_env)
set -u
root=${1:?usage: check_env_docs.sh SOURCE_DIR}
INTERNAL="SOFTRNIC_DAEMON" # set by `softrnic daemon` for itself
vars=$(grep -rhoE 'getenv\("SOFTRNIC_[A-Z0-9_]+"\)' "$root/src" "$root/tools" |
	sed 's/getenv("//; s/")//' | sort -u)
[ -n "$vars" ] || { echo "no SOFTRNIC_* getenv found under $root/src"; exit 1; }
bad=0
for v in $vars; do
	case " $INTERNAL " in *" $v "*) continue ;; esac
	grep -q "^\.B $v\$" "$root/docs/man/softrnic.1" ||
		{ echo "$v: not in docs/man/softrnic.1 (ENVIRONMENT)"; bad=1; }
	grep -q "^| \`$v\` |" "$root/README.md" ||
		{ echo "$v: not in README.md's configuration table"; bad=1; }
done
[ $bad = 0 ] && echo "docs_env: $(wc -w <<<"$vars") variables read, all but the internal ones documented"
exit $bad
