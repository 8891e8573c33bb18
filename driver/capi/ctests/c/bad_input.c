/*
 * Bad input through the C ABI: each gets its status, and nobody else is harmed.
 */
#include "child.h"

static void no_op(void *context, const HCABUS_EVENT *event)
{
    (void)context;
    (void)event;
}

/* Null pointers, wrong sizes and versions, another interface type, a foreign context. */
int ctest_bad_input(char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    CHECK(&r, hcabus_sim_create(NULL, NULL) == HCABUS_STATUS_INVALID_PARAMETER, "null out");
    HCABUS_SIM_CONFIG bad_config = {.Size = 3};
    CHECK(&r, hcabus_sim_create(&bad_config, &sim) == HCABUS_STATUS_INFO_LENGTH_MISMATCH,
          "config size");
    CHECK(&r, open_bus(NULL, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");

    /* The query interface, as a bus driver answers IRP_MN_QUERY_INTERFACE. */
    HCABUS_BUS_INTERFACE_V1 other;
    memset(&other, 0, sizeof(other));
    HCABUS_GUID wrong = GUID_HCABUS_BUS_INTERFACE;
    wrong.Data1 ^= 1;
    CHECK(&r, hcabus_sim_query_interface(sim, &wrong, sizeof(other), 1, &other) ==
                  HCABUS_STATUS_NOT_SUPPORTED, "another GUID");
    CHECK(&r, hcabus_sim_query_interface(sim, &GUID_HCABUS_BUS_INTERFACE, sizeof(other), 0,
                                         &other) == HCABUS_STATUS_REVISION_MISMATCH, "version 0");
    CHECK(&r, hcabus_sim_query_interface(sim, &GUID_HCABUS_BUS_INTERFACE, 32, 1, &other) ==
                  HCABUS_STATUS_BUFFER_TOO_SMALL, "a bare INTERFACE header is too small");
    CHECK(&r, hcabus_sim_query_interface(sim, NULL, sizeof(other), 1, &other) ==
                  HCABUS_STATUS_INVALID_PARAMETER, "null GUID");
    CHECK(&r, hcabus_sim_query_interface(NULL, &GUID_HCABUS_BUS_INTERFACE, sizeof(other), 1,
                                         &other) == HCABUS_STATUS_INVALID_PARAMETER, "null bus");
    CHECK(&r, other.Register == NULL, "nothing is written when refused");
    CHECK(&r, hcabus_sim_query_interface(sim, &GUID_HCABUS_BUS_INTERFACE, sizeof(other), 2,
                                         &other) == HCABUS_STATUS_SUCCESS, "version 2 asked");
    CHECK(&r, other.Version == 1, "version 1 given, and said");

    /* Register. */
    HCABUS_REGISTRATION reg;
    HCABUS_CLIENT_DESC desc = {
        .Size = sizeof(desc), .Kind = HCABUS_KIND_IPOIB, .Name = "ipoib0",
        .EventCallback = no_op,
    };
    CHECK(&r, bus.Register(bus.Context, NULL, &reg) == HCABUS_STATUS_INVALID_PARAMETER,
          "null desc");
    CHECK(&r, bus.Register(bus.Context, &desc, NULL) == HCABUS_STATUS_INVALID_PARAMETER,
          "null registration");
    HCABUS_CLIENT_DESC d = desc;
    d.Size = 24;
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INFO_LENGTH_MISMATCH, "size");
    d = desc;
    d.Name = NULL;
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INVALID_PARAMETER, "no name");
    d.Name = "a name far longer than the thirty-two bytes allowed";
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INVALID_PARAMETER, "long");
    d = desc;
    d.EventCallback = NULL;
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INVALID_PARAMETER,
          "no callback");
    d = desc;
    d.Kind = 42;
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INVALID_PARAMETER, "kind");
    d = desc;
    d.Flags = 0x100;
    CHECK(&r, bus.Register(bus.Context, &d, &reg) == HCABUS_STATUS_INVALID_PARAMETER, "flags");
    int local;
    CHECK(&r, bus.Register(&local, &desc, &reg) == HCABUS_STATUS_INVALID_PARAMETER,
          "a context that is not the bus's");
    CHECK(&r, bus.Register(NULL, &desc, &reg) == HCABUS_STATUS_INVALID_PARAMETER, "null context");
    CHECK(&r, bus.Register(bus.Context, &desc, &reg) == HCABUS_STATUS_SUCCESS, "a good one");
    CHECK(&r, reg.State == HCABUS_STATE_OPERATIONAL && reg.Late == 0, "registration");

    /* Ids and epochs. */
    uint64_t epoch = reg.Epoch;
    CHECK(&r, bus.ResetExecute(bus.Context, reg.ClientId, epoch) ==
                  HCABUS_STATUS_NO_RESET_PENDING, "execute with nothing pending");
    HCABUS_CLIENT_DESC gone_desc = desc;
    gone_desc.Name = "gone";
    HCABUS_REGISTRATION gone;
    CHECK(&r, bus.Register(bus.Context, &gone_desc, &gone) == HCABUS_STATUS_SUCCESS, "gone");
    CHECK(&r, bus.Unregister(bus.Context, gone.ClientId) == HCABUS_STATUS_SUCCESS, "gone");
    CHECK(&r, bus.ResetVeto(bus.Context, gone.ClientId, epoch, "x") ==
                  HCABUS_STATUS_STALE_CLIENT, "an id kept past its unregister");
    CHECK(&r, bus.ResetRequest(bus.Context, gone.ClientId, NULL) ==
                  HCABUS_STATUS_STALE_CLIENT, "a stale id asks nothing");
    CHECK(&r, bus.Unregister(bus.Context, 0xFFFF) == HCABUS_STATUS_UNKNOWN_CLIENT, "unknown id");
    HCABUS_BUS_STATE st = {.Size = 8};
    CHECK(&r, bus.QueryState(bus.Context, &st) == HCABUS_STATUS_INFO_LENGTH_MISMATCH,
          "state size");
    CHECK(&r, bus.QueryState(bus.Context, NULL) == HCABUS_STATUS_INVALID_PARAMETER, "null");

    /* Still whole after all that. */
    CHECK(&r, bus_state(&bus).State == HCABUS_STATE_OPERATIONAL, "state");
    CHECK(&r, hcabus_sim_destroy(sim) == HCABUS_STATUS_DEVICE_BUSY,
          "two interfaces are still referenced");
    other.InterfaceDereference(other.Context);
    CHECK(&r, bus.Unregister(bus.Context, reg.ClientId) == HCABUS_STATUS_SUCCESS, "unregister");
    close_bus(sim, &bus);
    return 0;
}

/* A child that never answers RESET: the reset goes on at its deadline, the others get their
 * RESET_END, and its late answer is told the reset went on without it. */
int ctest_callback_that_never_answers(char *msg, size_t len)
{
    struct report r = {msg, len};
    HCABUS_SIM *sim;
    HCABUS_BUS_INTERFACE_V1 bus;
    HCABUS_SIM_CONFIG config = {.Size = sizeof(config), .QuiesceDeadlineMs = 200};
    CHECK(&r, open_bus(&config, &sim, &bus) == HCABUS_STATUS_SUCCESS, "open");
    struct child good, silent;
    child_init(&good, "ipoib0", &bus, ANSWER_EXECUTE_INLINE, QUERY_CONSENT);
    child_init(&silent, "wedged", &bus, ANSWER_NEVER, QUERY_SILENT);
    CHECK(&r, child_register(&good, HCABUS_KIND_IPOIB, 0) == HCABUS_STATUS_SUCCESS, "good");
    CHECK(&r, child_register(&silent, HCABUS_KIND_CUSTOM, 0) == HCABUS_STATUS_SUCCESS, "silent");
    uint64_t start = bus_state(&bus).Epoch;
    CHECK(&r, hcabus_sim_admin_reset(sim, HCABUS_ADMIN_FORCED, NULL) == HCABUS_STATUS_SUCCESS,
          "admin reset");
    CHECK(&r, hcabus_sim_wait_idle(sim, 30000) == HCABUS_STATUS_SUCCESS, "settles");
    CHECK(&r, bus_state(&bus).Epoch == start + 1, "the reset went on without the silent one");
    char kinds[256];
    child_kinds(&good, kinds, sizeof(kinds));
    CHECK(&r, strcmp(kinds, "RESET,RESET_END") == 0, "good heard %s", kinds);
    HCABUS_STATUS late = bus.ResetExecute(bus.Context, silent.id, start);
    CHECK(&r, late == HCABUS_STATUS_NO_RESET_PENDING || late == HCABUS_STATUS_PAST_DEADLINE,
          "the late execute: 0x%08x", (unsigned)late);
    close_bus(sim, &bus);
    return 0;
}
