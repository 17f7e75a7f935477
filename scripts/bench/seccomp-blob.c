/* seccomp-blob: write a classic-BPF seccomp program to a file, for `bwrap --seccomp FD`.
 *
 * Used only by scripts/bench.sh, so that bubblewrap runs under a seccomp filter comparable to
 * airlock's (seccomp/<arch>.json). It denies the same system calls with the same errno, with
 * the same argument checks written by hand (clone namespace flags, ioctl TIOCSTI/TIOCLINUX,
 * socket families, personality), as one flat program that tests the syscall number against
 * each rule in turn (airlock's build compiles its policy into a binary search instead).
 *
 * Build: gcc -O2 -o seccomp-blob seccomp-blob.c      Usage: seccomp-blob OUTFILE
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "seccomp-blob: only x86_64 and aarch64"
#endif

#define NR_OFF offsetof(struct seccomp_data, nr)
#define ARCH_OFF offsetof(struct seccomp_data, arch)
/* Low 32 bits of an argument (little endian). */
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))

static struct sock_filter prog[512];
static unsigned n;

static void emit(unsigned short code, unsigned char jt, unsigned char jf, unsigned k) {
    if (n >= sizeof prog / sizeof prog[0]) {
        fprintf(stderr, "seccomp-blob: program too long\n");
        exit(1);
    }
    prog[n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

#define RET(v) emit(BPF_RET | BPF_K, 0, 0, (v))
#define EPERM_ (SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define ENOSYS_ (SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA))

/* if (nr == x) return EPERM; */
static void deny(long nr) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, (unsigned)nr);
    RET(EPERM_);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: seccomp-blob OUTFILE\n");
        return 2;
    }
    /* Another audit architecture: kill (as seccompiler does). */
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, ARCH_OFF);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, ARCH);
    RET(SECCOMP_RET_KILL_PROCESS);
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, NR_OFF);
    /* Numbers above mseal (462), x32 ones included: ENOSYS, like airlock's newer-call guard. */
    emit(BPF_JMP | BPF_JGT | BPF_K, 0, 1, 462);
    RET(ENOSYS_);

    /* clone: EPERM if any namespace flag is set (NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|
     * NEWPID|NEWNET), else allow. */
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 4, SYS_clone);
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(0));
    emit(BPF_JMP | BPF_JSET | BPF_K, 0, 1, 0x7e020000);
    RET(EPERM_);
    RET(SECCOMP_RET_ALLOW);

    /* ioctl: EPERM for TIOCSTI (0x5412) and TIOCLINUX (0x541c). */
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 5, SYS_ioctl);
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(1));
    emit(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 0x5412);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0x541c);
    RET(SECCOMP_RET_ALLOW);
    RET(EPERM_);

    /* socket: only AF_UNIX (1), AF_INET (2), AF_INET6 (10). */
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 6, SYS_socket);
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(0));
    emit(BPF_JMP | BPF_JEQ | BPF_K, 3, 0, 1);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 2);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 10);
    RET(EPERM_);
    RET(SECCOMP_RET_ALLOW);

    /* personality: only 0, PER_LINUX32 (8), 0x20000, 0x20008 and the 0xffffffff query. */
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 8, SYS_personality);
    emit(BPF_LD | BPF_W | BPF_ABS, 0, 0, ARG_LO(0));
    emit(BPF_JMP | BPF_JEQ | BPF_K, 5, 0, 0);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 4, 0, 8);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 3, 0, 0x20000);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 2, 0, 0x20008);
    emit(BPF_JMP | BPF_JEQ | BPF_K, 1, 0, 0xffffffff);
    RET(EPERM_);
    RET(SECCOMP_RET_ALLOW);

    /* clone3: ENOSYS, so libcs fall back to clone (whose flags are checked above). */
    emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, SYS_clone3);
    RET(ENOSYS_);

    /* Denied outright with EPERM (the names in airlock's deny filter). */
    static const long denied[] = {
#ifdef SYS__sysctl
        SYS__sysctl,
#endif
        SYS_acct, SYS_add_key,
#ifdef SYS_adjtimex
        SYS_adjtimex,
#endif
        SYS_bpf,
#ifdef SYS_chroot
        SYS_chroot,
#endif
        SYS_clock_adjtime, SYS_clock_settime, SYS_delete_module, SYS_fanotify_init,
        SYS_finit_module, SYS_fsconfig, SYS_fsmount, SYS_fsopen, SYS_fspick, SYS_init_module,
        SYS_io_uring_enter, SYS_io_uring_register, SYS_io_uring_setup,
#ifdef SYS_ioperm
        SYS_ioperm,
#endif
#ifdef SYS_iopl
        SYS_iopl,
#endif
        SYS_kcmp,
#ifdef SYS_kexec_file_load
        SYS_kexec_file_load,
#endif
        SYS_kexec_load, SYS_keyctl,
#ifdef SYS_lookup_dcookie
        SYS_lookup_dcookie,
#endif
        SYS_mbind, SYS_migrate_pages, SYS_mount, SYS_mount_setattr, SYS_move_mount,
        SYS_move_pages, SYS_name_to_handle_at,
#ifdef SYS_nfsservctl
        SYS_nfsservctl,
#endif
        SYS_open_by_handle_at, SYS_open_tree, SYS_perf_event_open, SYS_pidfd_getfd,
        SYS_pivot_root, SYS_process_vm_readv, SYS_process_vm_writev, SYS_ptrace, SYS_quotactl,
#ifdef SYS_quotactl_fd
        SYS_quotactl_fd,
#endif
        SYS_reboot, SYS_request_key, SYS_setdomainname, SYS_sethostname, SYS_setns,
        SYS_settimeofday, SYS_swapoff, SYS_swapon, SYS_syslog, SYS_umount2, SYS_unshare,
#ifdef SYS_uselib
        SYS_uselib,
#endif
        SYS_userfaultfd, SYS_vhangup,
    };
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
        deny(denied[i]);
    RET(SECCOMP_RET_ALLOW);

    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(prog, sizeof prog[0], n, f) != n || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("%u\n", n);
    return 0;
}
