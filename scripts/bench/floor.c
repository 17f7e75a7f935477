/* floor: the least a sandbox launcher can do, as issue 7 defines the floor. Used only by
 * scripts/bench.sh, as the "floor" column that airlock's launch is measured against.
 *
 * The parent creates the user, mount, pid, network and ipc namespaces with one clone, writes
 * the id maps (the caller's ids as uid/gid 0 inside) and waits. The child (pid 1 of the new
 * pid namespace) mounts a tmpfs root holding read-only binds of /usr and /etc, the usr-merge
 * links, a new /proc and a scratch directory; enters it with pivot_root and detaches the old
 * root; then forks the task, which drops its capabilities, sets no_new_privs, installs a
 * one-instruction seccomp filter (allow) and execs COMMAND. pid 1 waits for it and exits
 * with its status. No /dev, no loopback, no uts or cgroup namespace, no error reporting
 * beyond perror: a measuring stick, not a sandbox.
 *
 * Build (as bench.sh does): musl-gcc -O2 -static -idirafter /usr/include
 *     -idirafter /usr/include/x86_64-linux-gnu -o floor floor.c
 * Usage: floor COMMAND [ARG...]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void die(const char *what) {
    perror(what);
    _exit(125);
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        die(path);
    close(fd);
}

static void ro_bind(const char *src, const char *dest) {
    if (mkdir(dest, 0755) < 0 || mount(src, dest, NULL, MS_BIND | MS_REC, NULL) < 0 ||
        mount(NULL, dest, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
        die(dest);
}

static int wait_exit(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) < 0)
        die("waitpid");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: floor COMMAND [ARG...]\n");
        return 2;
    }
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0)
        die("pipe2");
    uid_t uid = geteuid();
    gid_t gid = getegid();
    long flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC;
    pid_t child = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
    if (child < 0)
        die("clone");
    if (child > 0) {
        char path[64], map[64];
        close(go[0]);
        snprintf(map, sizeof map, "0 %u 1\n", uid);
        snprintf(path, sizeof path, "/proc/%d/uid_map", child);
        write_file(path, map);
        snprintf(path, sizeof path, "/proc/%d/setgroups", child);
        write_file(path, "deny");
        snprintf(map, sizeof map, "0 %u 1\n", gid);
        snprintf(path, sizeof path, "/proc/%d/gid_map", child);
        write_file(path, map);
        close(go[1]);
        return wait_exit(child);
    }

    /* pid 1: wait for the maps (the parent closes its end), then build the root. */
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) < 0)
        die("read");
    close(go[0]);
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        die("make-private");
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0)
        die("tmpfs");
    if (chdir("/tmp") < 0)
        die("chdir");
    ro_bind("/usr", "usr");
    ro_bind("/etc", "etc");
    if (symlink("usr/bin", "bin") < 0 || symlink("usr/lib", "lib") < 0 ||
        symlink("usr/lib64", "lib64") < 0 || symlink("usr/sbin", "sbin") < 0)
        die("symlink");
    if (mkdir("proc", 0755) < 0 ||
        mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        die("proc");
    if (mkdir("work", 0755) < 0 || mkdir("old", 0755) < 0)
        die("mkdir");
    if (syscall(SYS_pivot_root, ".", "old") < 0)
        die("pivot_root");
    if (umount2("/old", MNT_DETACH) < 0 || rmdir("/old") < 0 || chdir("/work") < 0)
        die("detach old root");

    pid_t task = fork();
    if (task < 0)
        die("fork");
    if (task > 0)
        return wait_exit(task);
    struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct none[2] = {{0}};
    if (syscall(SYS_capset, &hdr, none) < 0)
        die("capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        die("no_new_privs");
    struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
    struct sock_fprog prog = {1, allow};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        die("seccomp");
    execvp(argv[1], argv + 1);
    perror(argv[1]);
    _exit(127);
}
