# shellcheck shell=bash
# Booting qemu (TCG) guests that run a job on the host root: sourced by
# tools/bzc-machine (one guest) and tools/bzc-machines (two on one link).
#
# A guest boots the distro kernel with a busybox initramfs, mounts the host
# root read-only over 9p, chroots onto it and runs "job" from its results
# share (a writable 9p share, /run/bzc-results inside), where the job also
# leaves its output, exit status and kernel log.
#
# The caller defines say() and die() and sets $tools and $BZC_BUILD.
# shellcheck disable=SC2154  # $tools comes from the caller

# Modules the initramfs needs to reach the host root: virtio PCI and 9p.
# Everything else (ib_core, rdma_rxe, dummy, virtio_net, ...) is modprobe'd
# after the chroot from the host's own /lib/modules/V, exactly as in native
# mode: the initramfs stays tiny and the setup script is the same in both.
vm_boot_modules=(virtio_pci 9pnet_virtio 9p)

# The guest's /init. It gets PATH=/bin with busybox applets.
read -r -d '' vm_guest_init <<'INIT' || true
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec </dev/null >/dev/console 2>&1
off() { sync; echo o >/proc/sysrq-trigger; sleep 60; }
while read -r path args; do
	# shellcheck disable=SC2086  # module parameters, word-split on purpose
	insmod "$path" $args || { echo "init: insmod $path failed"; off; }
done </modules.list
o=trans=virtio,version=9p2000.L,msize=512000
# The guest only reads the host root, which does not change under a test
# run: let it cache pages and lookups (cache=loose). Uncached, every exec
# and import goes back to the host: rdma-core 56's suite spawns rdma and
# ip several times per test, 1 to 3 s each that way under TCG.
mount -t 9p -o "$o,ro,cache=loose" hostroot /mnt || { echo "init: cannot mount the host root"; off; }
# The host root is read-only: give the chroot fresh kernel filesystems and
# writable scratch space (this hides the host's /tmp, /run and /var/tmp).
mount -t proc proc /mnt/proc
mount -t sysfs sysfs /mnt/sys
mount -t devtmpfs devtmpfs /mnt/dev
mkdir -p /mnt/dev/pts /mnt/dev/shm
mount -t devpts devpts /mnt/dev/pts
mount -t tmpfs tmpfs /mnt/dev/shm
mount -t debugfs debugfs /mnt/sys/kernel/debug
for d in /mnt/tmp /mnt/run /mnt/var/tmp; do mount -t tmpfs -o mode=1777 tmpfs "$d"; done
R=/mnt/run/bzc-results
mkdir $R
mount -t 9p -o "$o" results $R || { echo "init: cannot mount results"; off; }
# Host directories the tmpfs mounts hid that the job needs (a checkout
# under /tmp) come as shares of their own: "TAG PATH" lines.
if [ -e $R/mounts ]; then
	while read -r tag path; do
		mkdir -p "/mnt$path" &&
			mount -t 9p -o "$o,ro" "$tag" "/mnt$path" ||
			{ echo "init: cannot mount $path"; off; }
	done <$R/mounts
fi
# The kernel's own module requests (crypto algorithms, rdma link types, ...)
# run modprobe in the initramfs root, which has none: send them to the
# host's modprobe inside the chroot.
printf '#!/bin/busybox sh\nexec chroot /mnt /sbin/modprobe "$@"\n' >/bin/chroot-modprobe
chmod 755 /bin/chroot-modprobe
echo /bin/chroot-modprobe >/proc/sys/kernel/modprobe
hostname "$(cat $R/hostname 2>/dev/null || echo bzc-vm)"
ip link set lo up
chroot /mnt /bin/bash /run/bzc-results/job
off
INIT

# vm_initramfs V [ROOT]: build (or reuse) the initramfs for kernel V of the
# root ROOT (default /; another release's root: tools/platform); print its
# path.
vm_initramfs() {
	local v=$1 root=${2:-/} list m path args key out dir f
	list=$(
		for m in "${vm_boot_modules[@]}"; do
			modprobe -d "$root" -S "$v" --show-depends "$m" ||
				die "modprobe -d $root -S $v --show-depends $m failed"
		done | awk '$1 == "insmod" && !seen[$2]++ { $1 = ""; sub(/^ /, ""); print }'
	)
	# Keyed by what goes in: the init script, the module list, busybox.
	key=$( { printf '%s\n' "$vm_guest_init" "$list"; sha256sum /bin/busybox; } | sha256sum | cut -c1-16)
	out=$BZC_BUILD/machine/initramfs-$v-$key.cpio.gz
	if [[ -s $out ]]; then
		echo "$out"
		return
	fi
	say "building $out"
	mkdir -p "$(dirname "$out")"
	dir=$(mktemp -d)
	mkdir -p "$dir"/{bin,dev,proc,sys,mnt}
	cp /bin/busybox "$dir/bin/busybox"
	printf '%s\n' "$vm_guest_init" >"$dir/init"
	chmod 755 "$dir/init"
	: >"$dir/modules.list"
	while read -r path args; do
		mkdir -p "$dir$(dirname "$path")"
		# busybox insmod wants plain .ko files.
		case $path in
		*.ko.xz) f=${path%.xz}; xz -dc "$path" >"$dir$f" ;;
		*.ko.zst) f=${path%.zst}; zstd -qdc "$path" >"$dir$f" ;;
		*.ko.gz) f=${path%.gz}; gzip -dc "$path" >"$dir$f" ;;
		*) f=$path; cp "$path" "$dir$f" ;;
		esac
		echo "$f $args" >>"$dir/modules.list"
	done <<<"$list"
	(cd "$dir" && find . | cpio -o -H newc -R 0:0 --quiet | gzip -1) >"$out.tmp.$$"
	rm -rf "$dir"
	# Atomic, so a concurrent run never boots half a file; drop stale ones.
	mv "$out.tmp.$$" "$out"
	for f in "$BZC_BUILD/machine/initramfs-$v-"*.cpio.gz; do
		[[ $f == "$out" ]] || rm -f "$f"
	done
	echo "$out"
}

# vm_prepare DIR HOSTNAME: a fresh guest directory: DIR/share (the results
# share, with empty stdout and stderr), the console and qemu logs beside it.
vm_prepare() {
	mkdir -p "$1/share"
	: >"$1/share/stdout"
	: >"$1/share/stderr"
	: >"$1/console.log"
	echo "$2" >"$1/share/hostname"
}

# vm_share_dirs DIR PATH...: the guest sees the host root at the same paths
# except where it mounts fresh filesystems. PATHs under its tmpfs mounts
# (/tmp, /run, /var/tmp, /dev/shm: a checkout there, its build dir) become
# extra read-only shares mounted at the same paths; their qemu arguments go
# to the array vm_share_args. PATHs under /dev, /proc or /sys are refused.
# With vm_root set to another release's root (tools/platform), which has
# none of the host's directories, every PATH is shared (its mount point is
# made in that root first).
vm_share_dirs() {
	local dir=$1 p q n=0 hidden=()
	shift
	# shellcheck disable=SC2034  # the caller's
	vm_share_args=()
	for p in "$@"; do
		p=$(realpath -m "$p")
		case $p/ in
		/dev/* | /proc/* | /sys/*) die "VM mode: $p is not reachable inside the guest" ;;
		/tmp/* | /run/* | /var/tmp/* | /dev/shm/*) hidden+=("$p") ;;
		*)
			[[ ${vm_root:-/} == / ]] && continue
			mkdir -p "$vm_root$p" || die "cannot make $vm_root$p"
			hidden+=("$p")
			;;
		esac
	done
	: >"$dir/share/mounts"
	((${#hidden[@]})) || return 0
	# One share per outermost directory (the build dir inside the checkout
	# comes with it).
	local kept=()
	while read -r p; do
		for q in "${kept[@]}"; do
			[[ $p/ == "$q"/* ]] && continue 2
		done
		kept+=("$p")
		# shellcheck disable=SC2054  # commas belong to qemu's option syntax
		vm_share_args+=(-virtfs "local,path=$p,mount_tag=hidden$n,security_model=none,readonly=on,multidevs=remap")
		echo "hidden$n $p" >>"$dir/share/mounts"
		n=$((n + 1))
	done < <(printf '%s\n' "${hidden[@]}" | sort -u)
}

# vm_write_job DIR CWD EXPORTS CMD...: the job the guest runs in the chroot:
# CMD in CWD through tools/machine-setup, with the host's BZC_*, CI, ...
# variables (and those named in BZC_MACHINE_ENV) and then EXPORTS (shell
# lines) in its environment (the guest starts with an empty one). It leaves
# "status" and "dmesg" in the share.
vm_write_job() {
	local dir=$1 cwd=$2 exports=$3 name
	shift 3
	{
		cat <<'JOB'
R=/run/bzc-results
: >"$R/started"
exec >>"$R/stdout" 2>>"$R/stderr" </dev/null
# Read-only root: HOME must be writable. Output goes to files, so make
# Python flush as it goes for live progress.
export HOME=/tmp PYTHONUNBUFFERED=1
JOB
		printf 'export PATH=%q\n' "/usr/sbin:/sbin:$PATH"
		for name in $(compgen -e); do
			case $name in
			BZC_* | CI | TERM | LANG | LC_* | PYTEST_* | PY_COLORS | NO_COLOR | RDMAV_* | IBV_* | VERBS_*) ;;
			*) [[ " ${BZC_MACHINE_ENV:-} " == *" $name "* ]] || continue ;;
			esac
			printf 'export %s=%q\n' "$name" "${!name}"
		done
		printf '%s\n' "$exports"
		# Files the job leaves for the host (tools/bzc-machine copies
		# them into machine-logs/).
		echo 'mkdir -p "$R/artifacts" && export BZC_ARTIFACTS=$R/artifacts'
		printf 'cd %q && ' "$cwd"
		printf '%q ' "$tools/machine-setup" run -- "$@"
		cat <<'JOB'

echo $? >"$R/status.tmp"
dmesg >"$R/dmesg"
mv "$R/status.tmp" "$R/status"
JOB
	} >"$dir/share/job"
}

# vm_start DIR KERNEL INITRD ROOT [QEMU-ARG...]: boot one guest in the
# background on host directory ROOT (shared read-only as its root) with
# DIR/share as its results share; sets vm_pid. Options from the caller:
# $accel (tcg|kvm), $verbose (1: the whole boot log on the console),
# BZC_MACHINE_APPEND (more kernel arguments), BZC_MACHINE_MEM (MiB, 4096).
vm_start() {
	local dir=$1 kernel=$2 initrd=$3 root=$4 quiet=quiet
	shift 4
	# shellcheck disable=SC2054  # commas belong to qemu's option syntax
	local cpu=(-accel tcg,thread=multi -cpu max) tcg_args=""
	case ${accel:-tcg} in
	tcg)
		# tsc=unstable: no runtime patching of sched_clock_cpu(). Linux
		# 6.12 finds the TCG vCPUs' TSCs in sync and, seconds into the
		# boot, marks sched_clock stable, which flips a static key with
		# text_poke_bp(); under multi-threaded TCG the other vCPU may
		# still run the patch's int3 afterwards ("Oops: int3" in
		# sched_clock_cpu, panic). The TSC going unstable later under
		# host load flips it back the same way. 6.1 marks these TSCs
		# unsynchronized on its own, so both releases now run on HPET.
		tcg_args="tsc=unstable"
		;;
	kvm) cpu=(-accel kvm -cpu host) ;;
	*) die "BZC_MACHINE_ACCEL must be tcg or kvm" ;;
	esac
	[[ ${verbose:-0} == 1 ]] && quiet=""
	# hugepages: 32 MiB of 2 MiB pages for the ODP tests over hugetlbfs
	# (test_odp.py and rdma-core's test_odp.py), which skip without them.
	# no5lvl: four-level page tables, as most machines run; -cpu max offers
	# five, whose longer walks TCG pays on every TLB miss (pytest ran about
	# a tenth faster without them).
	local q=(qemu-system-x86_64 "${cpu[@]}" -smp 2 -m "${BZC_MACHINE_MEM:-4096}"
		-nographic -no-reboot -nic none -monitor none
		-serial "file:$dir/console.log"
		-kernel "$kernel" -initrd "$initrd"
		-append "console=ttyS0 $quiet panic=-1 no_timer_check no5lvl hugepages=16 $tcg_args ${BZC_MACHINE_APPEND:-}"
		-virtfs "local,path=$root,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
		-virtfs "local,path=$dir/share,mount_tag=results,security_model=none,multidevs=remap"
		"$@")
	"${q[@]}" </dev/null >"$dir/qemu.log" 2>&1 &
	# shellcheck disable=SC2034  # the caller's
	vm_pid=$!
}

# vm_stop PID: ask qemu to quit, SIGKILL it after 10 s.
vm_stop() {
	kill "$1" 2>/dev/null || return 0
	for _ in {1..50}; do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.2
	done
	kill -KILL "$1" 2>/dev/null || true
}

# Drop terminal control sequences (SeaBIOS clears the screen and turns off
# line wrapping on the serial console) before showing console output.
vm_plain() { sed -u -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[A-Za-z]//g' -e 's/\r$//'; }

# vm_status DIR TIMED-OUT QEMU-EXIT [LABEL]: print the job's exit status; for
# a guest that did not finish, 124 (timed out) or 1, after showing the end
# of its console and qemu's messages, and keep the console as its kernel log.
vm_status() {
	local dir=$1 share=$1/share label=${4:+$4: }
	if [[ -s $share/status ]]; then
		cat "$share/status"
		return
	fi
	if (($2)); then
		say "${label}last console lines:"
		echo 124
	else
		say "${label}the guest did not finish (qemu exit $3); last console lines:"
		echo 1
	fi
	vm_plain <"$dir/console.log" | tail -n 40 >&2
	[[ -s $dir/qemu.log ]] && { say "${label}qemu said:"; tail -n 20 "$dir/qemu.log" >&2; }
	# Without the guest's dmesg, the console is the best kernel log.
	[[ -s $share/dmesg ]] || vm_plain <"$dir/console.log" >"$share/dmesg"
}
