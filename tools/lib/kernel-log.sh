# shellcheck shell=bash
# Keeping and checking a machine's kernel log: sourced by tools/bzc-machine
# and tools/bzc-machines. The caller defines say().

# kernel_problems FILE: print the kernel-log lines that mean the kernel hit
# a bug; the taint and unsigned-module notes of an out-of-tree module are
# expected and ignored.
kernel_problems() {
	grep -E 'WARNING:|BUG:|Oops|general protection fault|Call Trace|kernel BUG|Kernel panic' "$1" |
		grep -vE 'taints kernel|tainting kernel|module verification failed' || true
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
		return 1
	fi
}
