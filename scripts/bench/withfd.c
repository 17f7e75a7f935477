/* withfd: open FILE read-only as descriptor FD, then exec COMMAND.
 *
 * Used only by scripts/bench.sh: hyperfine --shell=none cannot redirect, and `bwrap --seccomp
 * FD` reads FD to its end, so every launch needs a freshly opened descriptor. Every command in
 * a hyperfine comparison is started through withfd (airlock too, which closes the descriptor),
 * so all pay the same extra exec.
 *
 * Build: gcc -O2 -o withfd withfd.c      Usage: withfd FD FILE COMMAND [ARG...]
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: withfd FD FILE COMMAND [ARG...]\n");
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
    execvp(argv[3], argv + 3);
    perror(argv[3]);
    return 127;
}
