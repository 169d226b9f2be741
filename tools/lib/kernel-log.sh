# shellcheck shell=bash
# Keeping and checking a machine's kernel log: sourced by tools/bzc-machine
# and tools/bzc-machines. The caller defines say().

# kernel_problems FILE: print the kernel-log lines that mean the kernel hit
# a bug; the taint and unsigned-module notes of an out-of-tree module are
# expected and ignored. So is a user-mode general protection fault
# ("traps: COMM[PID] general protection fault ip:...") that a test matched
# to a known bug of a program it runs: it logs
# "bzc-pyverbs: known user-space crash of COMM[PID]: REASON" after the
# fault (pyverbs-tests/bzc_helpers.py, mark_known_user_crash()), which
# excuses that process's fault lines before it and nothing else. So is the
# one lockdep report whose cycle (the text after "Chain exists of:")
# contains BZC_KNOWN_LOCKDEP, when that is set: tools/debug-kernel names a
# report it has placed outside bzc for the boot that produces it. Only the
# report's "possible ... detected" and "Call Trace:" lines, and only when
# it is whole (up to "</TASK>"). bad_kernel_lines() in
# pyverbs-tests/bzc_helpers.py applies the same rules to each test.
kernel_problems() {
	BZC_KNOWN_LOCKDEP=${BZC_KNOWN_LOCKDEP:-} awk '
	BEGIN { chain = ENVIRON["BZC_KNOWN_LOCKDEP"]; inrep = 0 }
	function user_gpf(s) {
		if (!match(s, /traps: [^ ]+\[[0-9]+\] general protection fault ip:[0-9a-f]+ sp:[0-9a-f]+ error:[0-9a-f]+/))
			return ""
		s = substr(s, RSTART + 7)
		return substr(s, 1, index(s, "]"))
	}
	index($0, "bzc-pyverbs: known user-space crash of ") {
		s = substr($0, index($0, "bzc-pyverbs: known user-space crash of ") + 39)
		who = substr(s, 1, index(s, "]"))
		for (i = 1; i <= n; i++)
			if (key[i] != "" && key[i] == who)
				gone[i] = 1
		inrep = 0
		next
	}
	index($0, "WARNING: possible circular locking dependency detected") {
		inrep = 1; known = 0; nrep = 0
	}
	/WARNING:|BUG:|Oops|general protection fault|Call Trace|kernel BUG|Kernel panic/ &&
	!/taints kernel|tainting kernel|module verification failed/ {
		line[++n] = $0
		key[n] = user_gpf($0)
		if (inrep && /possible circular locking dependency detected|Call Trace/)
			rep[++nrep] = n
	}
	inrep {
		if (chain != "" && index($0, chain))
			known = 1
		if (index($0, "</TASK>")) {
			for (i = 1; known && i <= nrep; i++)
				gone[rep[i]] = 1
			inrep = 0
		}
	}
	END {
		for (i = 1; i <= n; i++)
			if (!(i in gone))
				print line[i]
	}' "$1"
}

# check_kernel_log FILE DEST: copy the kernel log FILE to DEST (the newest
# 100 logs in DEST's directory are kept) and check it. Returns non-zero if
# there is no log, it cannot be saved, or it shows a problem.
check_kernel_log() {
	local src=$1 dest=$2 bad logdir
	logdir=$(dirname "$dest")
	if [[ ! -s $src ]]; then
		say "no kernel log was saved"
		return 1
	fi
	# (Created only now: the build dir may have been wiped meanwhile.)
	if ! mkdir -p "$logdir" || ! cp "$src" "$dest"; then
		say "cannot save the kernel log to $dest"
		return 1
	fi
	say "kernel log: $dest"
	find "$logdir" -maxdepth 1 -name 'dmesg-*.log' -printf '%T@ %p\n' |
		sort -rn | tail -n +101 | cut -d' ' -f2- | xargs -r rm -f
	bad=$(kernel_problems "$src")
	if [[ -n $bad ]]; then
		say "kernel log shows problems:"
		printf '%s\n' "$bad" >&2
		say "the first report:"
		kernel_report "$src" "${bad%%$'\n'*}" >&2
		return 1
	fi
}

# kernel_report FILE LINE: the report in FILE that starts at LINE (a line
# kernel_problems printed), whole: the faulting RIP, the registers and the
# call trace say where a one-off crash happened, and the saved log may not
# outlive the machine that ran it (CI). Up to the report's end marker, at
# most 50 lines, without the "Code:" byte dump.
kernel_report() {
	awk -v first="$2" '
	!on && $0 == first { on = 1 }
	!on { next }
	/ Code: / { next }
	{ print; if (++n == 50) exit }
	/---\[ end trace|Kernel panic - not syncing|<\/TASK>/ && n > 1 { exit }' "$1"
}
