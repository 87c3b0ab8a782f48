/*
 * The pod sandbox's process (what registry.k8s.io/pause runs): hold the pod's namespaces open,
 * reap orphaned children while PID 1, and exit 0 on SIGINT/SIGTERM. Built static (gcc -Os
 * -static) into a `FROM scratch` image by rillet_devstack.images.build_pause.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signo) {
    (void)signo;
    _exit(0);
}

static void reap(int signo) {
    (void)signo;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_stop = {.sa_handler = stop};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
    sigemptyset(&on_stop.sa_mask);
    sigemptyset(&on_child.sa_mask);
    if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0) {
        return 1;
    }
    for (;;) {
        pause();
    }
}
