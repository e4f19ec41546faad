#!/bin/sh
# /init of the conformance VM's initramfs (busybox). Loads the disk drivers, mounts the
# root disk (vda) and the payload disk (vdb) at /conformance in it, runs the payload's
# call.sh chrooted there, writes its exit status to the payload's /result, powers off.
# No /result means the guest never reported: the runner fails the cell then.
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
say() { echo "pynox-init: $*" > /dev/console; }
# A test hook: pynox.noreport on the kernel command line stands for a guest that dies
# before reporting; it powers off at once (running call.sh first would only be waited for).
if grep -q 'pynox.noreport' /proc/cmdline; then
    say "pynox.noreport: powering off without a report"; poweroff -f
fi
while read -r module; do
    insmod "/modules/$module.ko" || say "insmod $module failed"
done < /modules/order
tries=0
while [ ! -b /dev/vdb ] && [ "$tries" -lt 200 ]; do sleep 0.05; tries=$((tries + 1)); done
R=/newroot
if ! mount -t ext4 /dev/vda "$R" || ! mount -t ext4 /dev/vdb "$R/conformance"; then
    say "cannot mount the disks"; poweroff -f
fi
mount -t proc proc "$R/proc"
mount -t sysfs sysfs "$R/sys"
mount -o bind /dev "$R/dev"
mount -t devpts devpts "$R/dev/pts" 2>/dev/null
mount -t tmpfs tmpfs "$R/tmp"
mount -t tmpfs tmpfs "$R/dev/shm" 2>/dev/null
hostname pynox-conformance
ifconfig lo 127.0.0.1 up  # the suite serves HTTPS on loopback
say "running call.sh on $(uname -r)"
chroot "$R" /bin/sh /conformance/call.sh > "$R/conformance/stdout" 2> "$R/conformance/stderr"
status=$?
printf 'exit %s\nkernel %s\n' "$status" "$(uname -r)" > "$R/conformance/result"
sync
umount "$R/conformance"
umount -l "$R" 2>/dev/null
say "done (exit $status)"
poweroff -f
