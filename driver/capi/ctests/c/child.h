/*
 * What every C child driver in these tests shares: a client that records its events, and the
 * failure report a test returns to the Rust harness.
 */
#ifndef CHILD_H
#define CHILD_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "hcabus_sim.h"

#define MAX_EVENTS 32

/* How a child answers RESET and RESET_QUERY. */
enum answer {
    ANSWER_EXECUTE_INLINE, /* reset_execute from inside the callback */
    ANSWER_EXECUTE_THREAD, /* a worker thread executes */
    ANSWER_UNREGISTER,     /* unregister from inside the callback */
    ANSWER_NEVER,          /* never answers */
};

enum query_answer { QUERY_CONSENT, QUERY_VETO, QUERY_SILENT };

struct child {
    const char *name;
    const HCABUS_BUS_INTERFACE_V1 *bus;
    uint64_t id;
    enum answer on_reset;
    enum query_answer on_query;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    HCABUS_EVENT events[MAX_EVENTS];
    unsigned long order[MAX_EVENTS]; /* global delivery order */
    int count;
    HCABUS_STATUS last_answer; /* status of the call the callback made */
    /* Worker thread: executes the epoch it is handed. */
    pthread_t worker;
    int worker_started;
    uint64_t pending_epoch;
    int pending;
    int stop;
};

/* A failed check: the harness prints the message. */
struct report {
    char *msg;
    size_t len;
};

#define CHECK(r, cond, ...)                                        \
    do {                                                           \
        if (!(cond)) {                                             \
            int n_ = snprintf((r)->msg, (r)->len, "%s:%d: ", __FILE__, __LINE__); \
            if (n_ > 0 && (size_t)n_ < (r)->len)                   \
                snprintf((r)->msg + n_, (r)->len - (size_t)n_, __VA_ARGS__); \
            return 1;                                              \
        }                                                          \
    } while (0)

/* Settles the bus; 30 s only turns a hang into a failure. */
#define SETTLE(r, sim) \
    CHECK(r, hcabus_sim_wait_idle(sim, 30000) == HCABUS_STATUS_SUCCESS, "the bus did not settle")

void child_init(struct child *c, const char *name, const HCABUS_BUS_INTERFACE_V1 *bus,
                enum answer on_reset, enum query_answer on_query);
HCABUS_STATUS child_register(struct child *c, uint16_t kind, uint32_t flags);
void child_stop(struct child *c);
/* Kinds of the events received, in order, as a string such as "RESET,RESET_END". */
void child_kinds(struct child *c, char *out, size_t len);
HCABUS_EVENT child_event(struct child *c, int i);
unsigned long child_order(struct child *c, int i);
int child_count(struct child *c);

HCABUS_STATUS open_bus(const HCABUS_SIM_CONFIG *config, HCABUS_SIM **sim,
                       HCABUS_BUS_INTERFACE_V1 *bus);
void close_bus(HCABUS_SIM *sim, HCABUS_BUS_INTERFACE_V1 *bus);
HCABUS_BUS_STATE bus_state(const HCABUS_BUS_INTERFACE_V1 *bus);

#endif
