/*
 * C child drivers on the hcabus bus interface: an IPoIB-like client that executes from its
 * callback, a boot-disk-like client whose worker thread executes, a client that unregisters
 * from its callback, and a CAN_VETO client that consents or vetoes a planned reset.
 *
 * Each test returns 0 or 1 with a message; the Rust harness (src/lib.rs) runs them.
 */
#include <stdlib.h>

#include "child.h"

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long next_order;

static const char *kind_name(uint16_t kind)
{
    switch (kind) {
    case HCABUS_EVENT_RESET: return "RESET";
    case HCABUS_EVENT_RESET_END: return "RESET_END";
    case HCABUS_EVENT_RESET_FAILED: return "RESET_FAILED";
    case HCABUS_EVENT_RESET_ABORTED: return "RESET_ABORTED";
    case HCABUS_EVENT_DEVICE_FATAL: return "DEVICE_FATAL";
    case HCABUS_EVENT_RESET_QUERY: return "RESET_QUERY";
    default: return "?";
    }
}

static void *worker_main(void *arg)
{
    struct child *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        while (!c->pending && !c->stop)
            pthread_cond_wait(&c->cond, &c->lock);
        if (c->stop)
            break;
        uint64_t epoch = c->pending_epoch;
        c->pending = 0;
        pthread_mutex_unlock(&c->lock);
        /* A thread at PASSIVE_LEVEL, outside any callback: the call may come at any time. */
        HCABUS_STATUS s = c->bus->ResetExecute(c->bus->Context, c->id, epoch);
        pthread_mutex_lock(&c->lock);
        c->last_answer = s;
    }
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/* The event callback: record, then answer as the child is told to. Never blocks for long:
 * the lock only guards the record, as a spin lock would. */
static void on_event(void *context, const HCABUS_EVENT *event)
{
    struct child *c = context;
    pthread_mutex_lock(&order_lock);
    unsigned long order = next_order++;
    pthread_mutex_unlock(&order_lock);

    pthread_mutex_lock(&c->lock);
    if (c->count < MAX_EVENTS) {
        c->events[c->count] = *event;
        c->order[c->count] = order;
        c->count++;
    }
    pthread_mutex_unlock(&c->lock);

    const HCABUS_BUS_INTERFACE_V1 *bus = c->bus;
    HCABUS_STATUS s = HCABUS_STATUS_SUCCESS;
    if (event->Kind == HCABUS_EVENT_RESET_QUERY) {
        uint64_t epoch = event->Data.Reset.Epoch;
        if (c->on_query == QUERY_CONSENT)
            s = bus->ResetConsent(bus->Context, c->id, epoch);
        else if (c->on_query == QUERY_VETO)
            s = bus->ResetVeto(bus->Context, c->id, epoch, "replication in progress");
    } else if (event->Kind == HCABUS_EVENT_RESET) {
        uint64_t epoch = event->Data.Reset.Epoch;
        switch (c->on_reset) {
        case ANSWER_EXECUTE_INLINE:
            s = bus->ResetExecute(bus->Context, c->id, epoch);
            break;
        case ANSWER_EXECUTE_THREAD:
            pthread_mutex_lock(&c->lock);
            c->pending_epoch = epoch;
            c->pending = 1;
            pthread_cond_signal(&c->cond);
            pthread_mutex_unlock(&c->lock);
            return;
        case ANSWER_UNREGISTER:
            s = bus->Unregister(bus->Context, c->id);
            break;
        case ANSWER_NEVER:
            return;
        }
    } else {
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->last_answer = s;
    pthread_mutex_unlock(&c->lock);
}

void child_init(struct child *c, const char *name, const HCABUS_BUS_INTERFACE_V1 *bus,
                enum answer on_reset, enum query_answer on_query)
{
    memset(c, 0, sizeof(*c));
    c->name = name;
    c->bus = bus;
    c->on_reset = on_reset;
    c->on_query = on_query;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    if (on_reset == ANSWER_EXECUTE_THREAD) {
        c->worker_started = pthread_create(&c->worker, NULL, worker_main, c) == 0;
    }
}

HCABUS_STATUS child_register(struct child *c, uint16_t kind, uint32_t flags)
{
    HCABUS_CLIENT_DESC desc = {
        .Size = sizeof(HCABUS_CLIENT_DESC),
        .Kind = kind,
        .Flags = flags,
        .Name = c->name,
        .EventCallback = on_event,
        .ClientContext = c,
    };
    HCABUS_REGISTRATION reg;
    memset(&reg, 0, sizeof(reg));
    /* The id is written before any event can reach the callback: register delivers none. */
    HCABUS_STATUS s = c->bus->Register(c->bus->Context, &desc, &reg);
    if (HCABUS_SUCCESS(s))
        c->id = reg.ClientId;
    return s;
}

void child_stop(struct child *c)
{
    if (c->worker_started) {
        pthread_mutex_lock(&c->lock);
        c->stop = 1;
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
        pthread_join(c->worker, NULL);
        c->worker_started = 0;
    }
}

void child_kinds(struct child *c, char *out, size_t len)
{
    out[0] = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < c->count; i++) {
        size_t used = strlen(out);
        snprintf(out + used, len - used, "%s%s", i ? "," : "", kind_name(c->events[i].Kind));
    }
    pthread_mutex_unlock(&c->lock);
}

HCABUS_EVENT child_event(struct child *c, int i)
{
    pthread_mutex_lock(&c->lock);
    HCABUS_EVENT e = c->events[i];
    pthread_mutex_unlock(&c->lock);
    return e;
}

unsigned long child_order(struct child *c, int i)
{
    pthread_mutex_lock(&c->lock);
    unsigned long o = c->order[i];
    pthread_mutex_unlock(&c->lock);
    return o;
}

int child_count(struct child *c)
{
    pthread_mutex_lock(&c->lock);
    int n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

HCABUS_STATUS open_bus(const HCABUS_SIM_CONFIG *config, HCABUS_SIM **sim,
                       HCABUS_BUS_INTERFACE_V1 *bus)
{
    HCABUS_STATUS s = hcabus_sim_create(config, sim);
    if (!HCABUS_SUCCESS(s))
        return s;
    memset(bus, 0, sizeof(*bus));
    return hcabus_sim_query_interface(*sim, &GUID_HCABUS_BUS_INTERFACE, sizeof(*bus),
                                      HCABUS_BUS_INTERFACE_VERSION, bus);
}

void close_bus(HCABUS_SIM *sim, HCABUS_BUS_INTERFACE_V1 *bus)
{
    bus->InterfaceDereference(bus->Context);
    hcabus_sim_destroy(sim);
}

HCABUS_BUS_STATE bus_state(const HCABUS_BUS_INTERFACE_V1 *bus)
{
    HCABUS_BUS_STATE st;
    memset(&st, 0, sizeof(st));
    st.Size = sizeof(st);
    bus->QueryState(bus->Context, &st);
    return st;
}


/*
 * An IPoIB-like child executes from inside its RESET callback; a boot-disk-like child
 * (PAGING_PATH) hands the epoch to a worker thread that executes. Both hear RESET once, then
 * RESET_END with the new epoch; RESET goes newest first, RESET_END oldest first.
 */
int ctest_ipoib_and_bootdisk(char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    CHECK(&r, open_bus(NULL, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");
    CHECK(&r, bus.Size == sizeof(bus) && bus.Version == 1, "header %u/%u", bus.Size, bus.Version);

    struct child ipoib, disk;
    child_init(&ipoib, "ipoib0", &bus, ANSWER_EXECUTE_INLINE, QUERY_CONSENT);
    child_init(&disk, "bootdisk", &bus, ANSWER_EXECUTE_THREAD, QUERY_CONSENT);
    CHECK(&r, child_register(&ipoib, HCABUS_KIND_IPOIB, 0) == HCABUS_STATUS_SUCCESS, "ipoib");
    CHECK(&r, child_register(&disk, HCABUS_KIND_BOOT_DISK,
                             HCABUS_FLAG_BOOT_CRITICAL | HCABUS_FLAG_PAGING_PATH) ==
                  HCABUS_STATUS_SUCCESS, "bootdisk");
    HCABUS_BUS_STATE before = bus_state(&bus);
    CHECK(&r, before.State == HCABUS_STATE_OPERATIONAL, "state %u", before.State);

    uint64_t epoch = 0;
    CHECK(&r, hcabus_sim_admin_reset(sim, HCABUS_ADMIN_FORCED, &epoch) == HCABUS_STATUS_SUCCESS,
          "admin reset");
    CHECK(&r, epoch == before.Epoch, "the reset tears down epoch %llu, not %llu",
          (unsigned long long)before.Epoch, (unsigned long long)epoch);
    SETTLE(&r, sim);

    HCABUS_BUS_STATE after = bus_state(&bus);
    CHECK(&r, after.State == HCABUS_STATE_OPERATIONAL, "state after %u", after.State);
    CHECK(&r, after.Epoch == before.Epoch + 1, "epoch %llu", (unsigned long long)after.Epoch);
    child_stop(&disk); /* its worker has made its call: its answer is final */
    char kinds[256];
    struct child *both[] = {&ipoib, &disk};
    for (int i = 0; i < 2; i++) {
        struct child *c = both[i];
        child_kinds(c, kinds, sizeof(kinds));
        CHECK(&r, strcmp(kinds, "RESET,RESET_END") == 0, "%s heard %s", c->name, kinds);
        HCABUS_EVENT reset = child_event(c, 0), end = child_event(c, 1);
        CHECK(&r, reset.Size == sizeof(HCABUS_EVENT) && reset.ClientId == c->id, "%s", c->name);
        CHECK(&r, reset.Data.Reset.Epoch == before.Epoch, "%s RESET epoch", c->name);
        CHECK(&r, reset.Data.Reset.Reason == HCABUS_REASON_ADMIN_FORCED, "%s reason", c->name);
        CHECK(&r, reset.Data.Reset.Planned == 0, "%s planned", c->name);
        CHECK(&r, reset.Data.Reset.DeadlineUs > 0, "%s deadline", c->name);
        CHECK(&r, end.Data.ResetEnd.Epoch == after.Epoch, "%s RESET_END epoch %llu", c->name,
              (unsigned long long)end.Data.ResetEnd.Epoch);
        CHECK(&r, end.Data.ResetEnd.Result == HCABUS_OUTCOME_RESTORED, "%s outcome", c->name);
        CHECK(&r, c->last_answer == HCABUS_STATUS_SUCCESS, "%s's execute: 0x%08x", c->name,
              (unsigned)c->last_answer);
    }
    CHECK(&r, child_order(&disk, 0) < child_order(&ipoib, 0), "RESET goes newest first");
    CHECK(&r, child_order(&ipoib, 1) < child_order(&disk, 1), "RESET_END goes oldest first");

    /* Executing again after the reset is over: no reset pending. */
    CHECK(&r, bus.ResetExecute(bus.Context, ipoib.id, before.Epoch) ==
                  HCABUS_STATUS_NO_RESET_PENDING, "late execute");
    CHECK(&r, bus.Unregister(bus.Context, ipoib.id) == HCABUS_STATUS_SUCCESS, "unregister");
    CHECK(&r, bus.Unregister(bus.Context, disk.id) == HCABUS_STATUS_SUCCESS, "unregister");
    close_bus(sim, &bus);
    return 0;
}

/* A child that unregisters from inside its RESET callback counts as ready; the reset goes on
 * and its id is stale afterwards. */
int ctest_unregister_in_callback(char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    CHECK(&r, open_bus(NULL, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");
    struct child srp, leaver;
    child_init(&srp, "srp0", &bus, ANSWER_EXECUTE_INLINE, QUERY_CONSENT);
    child_init(&leaver, "leaver", &bus, ANSWER_UNREGISTER, QUERY_CONSENT);
    CHECK(&r, child_register(&srp, HCABUS_KIND_SRP, 0) == HCABUS_STATUS_SUCCESS, "srp");
    CHECK(&r, child_register(&leaver, HCABUS_KIND_CUSTOM, 0) == HCABUS_STATUS_SUCCESS, "leaver");
    uint64_t start = bus_state(&bus).Epoch;
    CHECK(&r, hcabus_sim_admin_reset(sim, HCABUS_ADMIN_FORCED, NULL) == HCABUS_STATUS_SUCCESS,
          "admin reset");
    SETTLE(&r, sim);
    char kinds[256];
    child_kinds(&leaver, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET") == 0, "the leaver heard %s", kinds);
    CHECK(&r, leaver.last_answer == HCABUS_STATUS_SUCCESS, "unregister in callback: 0x%08x",
          (unsigned)leaver.last_answer);
    child_kinds(&srp, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET,RESET_END") == 0, "srp heard %s", kinds);
    CHECK(&r, bus_state(&bus).Epoch == start + 1, "the reset completed");
    CHECK(&r, bus.Unregister(bus.Context, leaver.id) == HCABUS_STATUS_STALE_CLIENT,
          "a second unregister names a stale id");
    CHECK(&r, bus.ResetRequest(bus.Context, leaver.id, NULL) == HCABUS_STATUS_STALE_CLIENT,
          "a stale id asks nothing");
    close_bus(sim, &bus);
    return 0;
}

/* A planned reset asks the CAN_VETO child first. Consent: RESET to everyone as usual. Veto:
 * RESET_ABORTED to the vetoer only, nobody else hears anything, the epoch stays. */
int ctest_query_consent_and_veto(char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    CHECK(&r, open_bus(NULL, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");
    struct child plain, db;
    child_init(&plain, "ipoib0", &bus, ANSWER_EXECUTE_INLINE, QUERY_CONSENT);
    child_init(&db, "db", &bus, ANSWER_EXECUTE_INLINE, QUERY_CONSENT);
    CHECK(&r, child_register(&plain, HCABUS_KIND_IPOIB, 0) == HCABUS_STATUS_SUCCESS, "plain");
    CHECK(&r, child_register(&db, HCABUS_KIND_CUSTOM, HCABUS_FLAG_CAN_VETO) ==
                  HCABUS_STATUS_SUCCESS, "db");
    uint64_t start = bus_state(&bus).Epoch;

    CHECK(&r, hcabus_sim_admin_reset(sim, HCABUS_ADMIN_PLANNED, NULL) == HCABUS_STATUS_SUCCESS,
          "planned reset");
    SETTLE(&r, sim);
    char kinds[256];
    child_kinds(&db, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET_QUERY,RESET,RESET_END") == 0, "db heard %s", kinds);
    HCABUS_EVENT query = child_event(&db, 0);
    CHECK(&r, query.Data.Reset.Planned == 1 &&
                  query.Data.Reset.Reason == HCABUS_REASON_ADMIN_PLANNED, "the query");
    child_kinds(&plain, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET,RESET_END") == 0, "plain heard %s", kinds);
    CHECK(&r, bus_state(&bus).Epoch == start + 1, "consented: the reset went through");
    CHECK(&r, bus.ResetConsent(bus.Context, db.id, start + 1) == HCABUS_STATUS_NO_QUERY_PENDING,
          "consent with no query");
    CHECK(&r, bus.ResetVeto(bus.Context, plain.id, start + 1, NULL) ==
                  HCABUS_STATUS_NO_RESET_PENDING, "veto with no reset");

    db.on_query = QUERY_VETO;
    CHECK(&r, hcabus_sim_admin_reset(sim, HCABUS_ADMIN_PLANNED, NULL) == HCABUS_STATUS_SUCCESS,
          "second planned reset");
    SETTLE(&r, sim);
    child_kinds(&db, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET_QUERY,RESET,RESET_END,RESET_QUERY,RESET_ABORTED") == 0,
          "db heard %s", kinds);
    HCABUS_EVENT aborted = child_event(&db, 4);
    CHECK(&r, aborted.Data.ResetAborted.VetoedBy == db.id, "vetoed by");
    CHECK(&r, aborted.Data.ResetAborted.Cause == HCABUS_ABORT_VETO, "cause");
    CHECK(&r, aborted.Data.ResetAborted.Epoch == start + 1, "the epoch stays");
    child_kinds(&plain, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET,RESET_END") == 0, "a veto disturbs nobody: plain heard %s",
          kinds);
    CHECK(&r, bus_state(&bus).Epoch == start + 1, "vetoed: nothing was reset");
    CHECK(&r, db.last_answer == HCABUS_STATUS_SUCCESS, "the veto: 0x%08x",
          (unsigned)db.last_answer);
    close_bus(sim, &bus);
    return 0;
}
