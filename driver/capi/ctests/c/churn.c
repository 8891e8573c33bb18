/*
 * Children written as Windows children are, churning on one bus during resets: each keeps its
 * bookkeeping under its own spin lock, holds that lock (at DISPATCH_LEVEL) across Register and
 * takes it in its callback, and unregisters at PASSIVE_LEVEL, after which it treats its context
 * as freed. The bus must never call back on a thread at DISPATCH_LEVEL (that would deadlock on
 * the child's own lock), and no callback may start or still run once Unregister has returned
 * (Unregister is a rundown: a child frees its context and unloads after it).
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "child.h"

struct churner {
    const HCABUS_BUS_INTERFACE_V1 *bus;
    int index;
    int rounds;
    atomic_flag spin;          /* the child's own spin lock */
    uint64_t id;               /* under the spin lock */
    atomic_int in_callback;    /* callbacks of this child running now */
    atomic_int gone;           /* Unregister returned: the context counts as freed */
    atomic_ulong late;         /* callbacks that started or ran on after Unregister returned */
    atomic_ulong stale;        /* callbacks for a registration that had ended */
    atomic_ulong callbacks;
    atomic_ulong refused;      /* bus calls refused that should not be */
    pthread_t thread;
};

static atomic_int churners_done;

static void spin_acquire(struct churner *c)
{
    /* A spin lock: it never sleeps on a queue (yielding only lets 16 spinners share 2 CPUs). */
    while (atomic_flag_test_and_set_explicit(&c->spin, memory_order_acquire))
        sched_yield();
}

static void spin_release(struct churner *c)
{
    atomic_flag_clear_explicit(&c->spin, memory_order_release);
}

static void churn_event(void *context, const HCABUS_EVENT *event)
{
    struct churner *c = context;
    atomic_fetch_add(&c->in_callback, 1);
    atomic_fetch_add(&c->callbacks, 1);
    if (atomic_load(&c->gone))
        atomic_fetch_add(&c->late, 1);
    spin_acquire(c);
    uint64_t id = c->id;
    spin_release(c);
    if (event->ClientId != id)
        atomic_fetch_add(&c->stale, 1);
    /* Answers from the callback, as an IPoIB miniport does. */
    if (event->Kind == HCABUS_EVENT_RESET)
        c->bus->ResetExecute(c->bus->Context, event->ClientId, event->Data.Reset.Epoch);
    if (atomic_load(&c->gone))
        atomic_fetch_add(&c->late, 1);
    atomic_fetch_sub(&c->in_callback, 1);
}

static void *churn_main(void *arg)
{
    struct churner *c = arg;
    char name[16];
    snprintf(name, sizeof(name), "churn%d", c->index);
    for (int i = 0; i < c->rounds; i++) {
        HCABUS_CLIENT_DESC desc = {
            .Size = sizeof(desc),
            .Kind = HCABUS_KIND_CUSTOM,
            .Flags = 0,
            .Name = name,
            .EventCallback = churn_event,
            .ClientContext = c,
        };
        HCABUS_REGISTRATION reg;
        uint8_t old = hcabus_sim_raise_irql_to_dispatch();
        spin_acquire(c);
        atomic_store(&c->gone, 0);
        HCABUS_STATUS s = c->bus->Register(c->bus->Context, &desc, &reg);
        c->id = HCABUS_SUCCESS(s) ? reg.ClientId : 0;
        spin_release(c);
        hcabus_sim_lower_irql(old);
        if (!HCABUS_SUCCESS(s)) {
            atomic_fetch_add(&c->refused, 1);
            continue;
        }
        sched_yield();
        if (c->bus->Unregister(c->bus->Context, reg.ClientId) != HCABUS_STATUS_SUCCESS)
            atomic_fetch_add(&c->refused, 1);
        /* From here on the context is freed as far as the bus may know. */
        atomic_store(&c->gone, 1);
        if (atomic_load(&c->in_callback) != 0)
            atomic_fetch_add(&c->late, 1);
    }
    atomic_fetch_add(&churners_done, 1);
    return NULL;
}

static double seconds_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) / 1e9;
}

#define CHURNERS 16

/*
 * One run: 16 churning children, `resets` forced resets meanwhile. A deadlock is reported as
 * such after 60 s (its threads are left: the process cannot free a bus they hold).
 */
int ctest_churn(int resets, int rounds, char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM_CONFIG config = {.Size = sizeof(config), .HwResetMs = 1};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    CHECK(&r, open_bus(&config, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");
    static struct churner children[CHURNERS];
    atomic_store(&churners_done, 0);
    for (int i = 0; i < CHURNERS; i++) {
        struct churner *c = &children[i];
        memset(c, 0, sizeof(*c));
        c->bus = &bus;
        c->index = i;
        c->rounds = rounds;
        atomic_flag_clear(&c->spin);
        CHECK(&r, pthread_create(&c->thread, NULL, churn_main, c) == 0, "thread");
    }
    for (int i = 0; i < resets; i++) {
        HCABUS_STATUS s = hcabus_sim_admin_reset(sim, HCABUS_ADMIN_FORCED, NULL);
        CHECK(&r, HCABUS_SUCCESS(s), "reset %d: 0x%08x", i, (unsigned)s);
        CHECK(&r, hcabus_sim_wait_idle(sim, 60000) == HCABUS_STATUS_SUCCESS,
              "reset %d did not settle: a deadlock", i);
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    while (atomic_load(&churners_done) < CHURNERS) {
        CHECK(&r, seconds_since(&start) < 60.0, "%d of %d children still churning after 60 s: a deadlock",
              CHURNERS - atomic_load(&churners_done), CHURNERS);
        sched_yield();
    }
    unsigned long late = 0, stale = 0, callbacks = 0, refused = 0;
    for (int i = 0; i < CHURNERS; i++) {
        pthread_join(children[i].thread, NULL);
        late += atomic_load(&children[i].late);
        stale += atomic_load(&children[i].stale);
        callbacks += atomic_load(&children[i].callbacks);
        refused += atomic_load(&children[i].refused);
    }
    SETTLE(&r, sim);
    CHECK(&r, late == 0, "%lu callbacks started or ran after their Unregister returned (of %lu)",
          late, callbacks);
    CHECK(&r, stale == 0, "%lu callbacks for an ended registration (of %lu)", stale, callbacks);
    CHECK(&r, refused == 0, "%lu register or unregister calls refused", refused);
    CHECK(&r, callbacks > 0, "no callback ran: the churn tested nothing");
    close_bus(sim, &bus);
    return 0;
}
