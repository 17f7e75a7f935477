/* withfd: open FILE read-only as descriptor FD, then exec COMMAND (an absolute path).
 *
 * Used only by scripts/bench.sh: hyperfine --shell=none cannot redirect, and `bwrap --seccomp
 * FD` reads FD to its end, so every launch needs a freshly opened descriptor. Every command in
 * a hyperfine comparison is started through withfd (airlock too, which closes the descriptor),
 * so all pay the same extra exec.
 *
 * That extra exec is the harness's, not the launchers': it is kept as small as it can be. On
 * x86-64 withfd is built without a C library (WITHFD_NOLIBC: its own _start and raw system
 * calls). A glibc program spends about 1 ms of its start probing the CPU on a VM (CPUID traps
 * to the hypervisor); that millisecond would be added to every row and pull every ratio
 * towards 1. Elsewhere it is built against the C library.
 *
 * Build: gcc -O2 -static -nostdlib -ffreestanding -fno-tree-loop-distribute-patterns
 *        -fno-stack-protector -DWITHFD_NOLIBC -o withfd withfd.c
 *        (x86-64), or gcc -O2 -o withfd withfd.c
 * Usage: withfd FD FILE /ABSOLUTE/COMMAND [ARG...]
 */
#if defined(WITHFD_NOLIBC) && defined(__x86_64__)

enum { NR_write = 1, NR_open = 2, NR_close = 3, NR_dup2 = 33, NR_execve = 59, NR_exit = 60 };

static long sys3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
}

static void say(const char *s) {
    long n = 0;
    while (s[n])
        n++;
    sys3(NR_write, 2, (long)s, n);
}

static void fail(const char *what, const char *arg, int code) {
    say("withfd: ");
    say(what);
    say(arg);
    say("\n");
    sys3(NR_exit, code, 0, 0);
}

/* Called from _start with the initial stack: argc, argv[], NULL, envp[], NULL. */
__attribute__((used, noreturn)) void withfd_start(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    char **envp = argv + argc + 1;
    if (argc < 4)
        fail("usage: withfd FD FILE /ABSOLUTE/COMMAND [ARG...]", "", 2);
    long want = 0;
    for (const char *p = argv[1]; *p >= '0' && *p <= '9'; p++)
        want = want * 10 + (*p - '0');
    long fd = sys3(NR_open, (long)argv[2], 0 /* O_RDONLY */, 0);
    if (fd < 0)
        fail("cannot open ", argv[2], 2);
    if (fd != want) {
        if (sys3(NR_dup2, fd, want, 0) < 0)
            fail("dup2 failed for ", argv[2], 2);
        sys3(NR_close, fd, 0, 0);
    }
    sys3(NR_execve, (long)argv[3], (long)(argv + 3), (long)envp);
    fail("cannot exec ", argv[3], 127);
    __builtin_unreachable();
}

__asm__(".text\n"
        ".global _start\n"
        "_start:\n"
        "    xor %ebp, %ebp\n"
        "    mov %rsp, %rdi\n"
        "    and $-16, %rsp\n"
        "    call withfd_start\n"
        "    hlt\n");

#else

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: withfd FD FILE /ABSOLUTE/COMMAND [ARG...]\n");
        return 2;
    }
    int want = atoi(argv[1]);
    int fd = open(argv[2], O_RDONLY);
    if (fd < 0) {
        perror(argv[2]);
        return 2;
    }
    if (fd != want) {
        if (dup2(fd, want) < 0) {
            perror("dup2");
            return 2;
        }
        close(fd);
    }
    execv(argv[3], argv + 3);
    perror(argv[3]);
    return 127;
}

#endif
