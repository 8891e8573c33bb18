/*
 * hcabus_sim.h: the Linux test build of the bus interface (driver/capi).
 *
 * What the parent bus driver and the PnP manager do on Windows, as calls: create a bus over a
 * simulated HCA, answer IRP_MN_QUERY_INTERFACE, reset the device as an administrator would,
 * and wait for the bus to settle (a test's convenience; never call it from a callback).
 */
#ifndef HCABUS_SIM_H
#define HCABUS_SIM_H

#include "hcabus.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct HCABUS_SIM HCABUS_SIM;

/* Zero in any field means its default. */
typedef struct HCABUS_SIM_CONFIG {
    uint32_t Size; /* sizeof(HCABUS_SIM_CONFIG) */
    uint32_t MaxClients;
    uint32_t QuiesceDeadlineMs;
    uint32_t QueryDeadlineMs;
    uint32_t HwResetMs; /* how long the simulated device stays in reset */
    uint32_t Reserved;
} HCABUS_SIM_CONFIG;

#define HCABUS_ADMIN_FORCED 1
#define HCABUS_ADMIN_PLANNED 2
#define HCABUS_ADMIN_FIRMWARE_ACTIVATE 3

/* Config may be NULL (every default). */
HCABUS_STATUS hcabus_sim_create(const HCABUS_SIM_CONFIG *Config, HCABUS_SIM **Sim);
/* HCABUS_STATUS_DEVICE_BUSY while an interface is still referenced. */
HCABUS_STATUS hcabus_sim_destroy(HCABUS_SIM *Sim);
HCABUS_STATUS hcabus_sim_query_interface(HCABUS_SIM *Sim, const HCABUS_GUID *InterfaceType,
                                         uint16_t Size, uint16_t Version,
                                         HCABUS_BUS_INTERFACE_V1 *Interface);
/* Epoch may be NULL. */
HCABUS_STATUS hcabus_sim_admin_reset(HCABUS_SIM *Sim, uint32_t Mode, uint64_t *Epoch);
/* HCABUS_STATUS_TIMEOUT when the bus did not settle in time. */
HCABUS_STATUS hcabus_sim_wait_idle(HCABUS_SIM *Sim, uint32_t TimeoutMs);

/*
 * The calling thread's IRQL, as KeRaiseIrql / KeLowerIrql: a child raises to DISPATCH_LEVEL
 * when it takes its own spin lock. A bus call made at DISPATCH_LEVEL never runs a callback on
 * the calling thread (it is delivered on another, as on another processor); a callback runs
 * with its thread at DISPATCH_LEVEL. Levels: 0 PASSIVE_LEVEL, 2 DISPATCH_LEVEL.
 * hcabus_sim_lower_irql refuses (logs, changes nothing) a value that is no level, and a level
 * above the thread's current one: lowering never raises (KeLowerIrql to a higher level is
 * bugcheck IRQL_NOT_LESS_OR_EQUAL).
 */
#define HCABUS_SIM_PASSIVE_LEVEL 0
#define HCABUS_SIM_DISPATCH_LEVEL 2
uint8_t hcabus_sim_raise_irql_to_dispatch(void);
void hcabus_sim_lower_irql(uint8_t OldIrql);

#ifdef __cplusplus
}
#endif

#endif /* HCABUS_SIM_H */
