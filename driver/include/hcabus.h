/*
 * hcabus.h: the hcabus bus interface for child drivers (docs/design.md §3, "The C ABI").
 *
 * A child driver (IPoIB, SRP, another vendor's ULP) gets HCABUS_BUS_INTERFACE_V1 from its
 * parent with IRP_MN_QUERY_INTERFACE, InterfaceType = GUID_HCABUS_BUS_INTERFACE,
 * Size = sizeof(HCABUS_BUS_INTERFACE_V1), Version = HCABUS_BUS_INTERFACE_VERSION. The
 * structure starts with the standard INTERFACE header, so a pointer to it may be passed as a
 * PINTERFACE. It is referenced before it is returned; call InterfaceDereference(Context) once
 * when done with it (after Unregister), also when refusing what the query returned. On
 * Windows KMDF answers the query and copies the bus's own structure: check Size and Version
 * before any call (a larger, later structure asked for gets version 1's bytes only).
 *
 * Every call returns an NTSTATUS (success when >= 0). Events arrive through the callback given
 * at registration, with no bus lock held, under DISPATCH_LEVEL rules (on Windows at
 * DISPATCH_LEVEL, from the bus's DPC): the callback must not block or wait, and it may call
 * any function of the interface (ResetExecute, Unregister, Register included). See
 * docs/child-driver.md (the pattern) and docs/bus-interface.md (the reference).
 *
 * The layout is the Rust definition's (driver/src/bus_abi.rs); a test compiles this header
 * and compares every size, offset and constant with it.
 */
#ifndef HCABUS_H
#define HCABUS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__cplusplus)
#define HCABUS_STATIC_ASSERT(e, m) static_assert(e, m)
#else
#define HCABUS_STATIC_ASSERT(e, m) _Static_assert(e, m)
#endif

typedef int32_t HCABUS_STATUS;

typedef struct HCABUS_GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} HCABUS_GUID;

/* {94C1064B-33E7-419F-9DD5-142076BB0D32} */
#define HCABUS_BUS_INTERFACE_GUID_INIT \
    { 0x94C1064Bu, 0x33E7u, 0x419Fu, { 0x9D, 0xD5, 0x14, 0x20, 0x76, 0xBB, 0x0D, 0x32 } }
static const HCABUS_GUID GUID_HCABUS_BUS_INTERFACE = HCABUS_BUS_INTERFACE_GUID_INIT;

#define HCABUS_BUS_INTERFACE_VERSION 1

/* Client kinds (HCABUS_CLIENT_DESC.Kind). */
#define HCABUS_KIND_IBAL 1
#define HCABUS_KIND_IPOIB 2
#define HCABUS_KIND_SRP 3
#define HCABUS_KIND_BOOT_DISK 4
#define HCABUS_KIND_UVERBS 5
#define HCABUS_KIND_CUSTOM 6

/* Client flags (HCABUS_CLIENT_DESC.Flags). */
#define HCABUS_FLAG_BOOT_CRITICAL 0x1u
#define HCABUS_FLAG_PAGING_PATH 0x2u
#define HCABUS_FLAG_USER_MODE 0x4u
#define HCABUS_FLAG_CAN_VETO 0x8u

/* Bus states (HCABUS_REGISTRATION.State, HCABUS_BUS_STATE.State). */
#define HCABUS_STATE_OPERATIONAL 1
#define HCABUS_STATE_QUIESCING 2
#define HCABUS_STATE_RESETTING 3
#define HCABUS_STATE_RESTORING 4
#define HCABUS_STATE_FAILED 5
#define HCABUS_STATE_REMOVED 6
#define HCABUS_STATE_PREPARING 7

/* Events (HCABUS_EVENT.Kind). */
#define HCABUS_EVENT_RESET 1
#define HCABUS_EVENT_RESET_END 2
#define HCABUS_EVENT_RESET_FAILED 3
#define HCABUS_EVENT_RESET_ABORTED 4
#define HCABUS_EVENT_DEVICE_FATAL 5
#define HCABUS_EVENT_RESET_QUERY 6
#define HCABUS_EVENT_PORT_ACTIVE 7
#define HCABUS_EVENT_PORT_DOWN 8

/* Reset reasons (HCABUS_RESET_DATA.Reason), least to most severe. */
#define HCABUS_REASON_ADMIN_PLANNED 1
#define HCABUS_REASON_FIRMWARE_ACTIVATE 2
#define HCABUS_REASON_ADMIN_FORCED 3
#define HCABUS_REASON_CLIENT_REQUEST 4
#define HCABUS_REASON_HEALTH_STALL 5
#define HCABUS_REASON_COMMAND_TIMEOUT 6
#define HCABUS_REASON_CATASTROPHIC 7

/* RESET_END outcomes (HCABUS_RESET_END_DATA.Result). */
#define HCABUS_OUTCOME_RESTORED 1
#define HCABUS_OUTCOME_FIRMWARE_CHANGED 2

/* RESET_FAILED errors (HCABUS_RESET_END_DATA.Result). */
#define HCABUS_FAIL_HARDWARE_DEAD 1
#define HCABUS_FAIL_DEVICE_REPLACED 2
#define HCABUS_FAIL_STORM_LIMIT 3
#define HCABUS_FAIL_AUTO_RESTART_EXPIRED 4
#define HCABUS_FAIL_AUTO_RECOVER_OFF 5

/* RESET_ABORTED causes (HCABUS_RESET_ABORTED_DATA.Cause). */
#define HCABUS_ABORT_VETO 1
#define HCABUS_ABORT_UNRESPONSIVE 2

/* DEVICE_FATAL reasons (HCABUS_DEVICE_FATAL_DATA.Reason). */
#define HCABUS_FATAL_SURPRISE_REMOVAL 1

/* Status codes. Refusals are 0xE0AB0000 | code: error severity, customer bit, facility 0xAB. */
#define HCABUS_STATUS_SUCCESS ((HCABUS_STATUS)0x00000000)
#define HCABUS_STATUS_ALREADY_READY ((HCABUS_STATUS)0x60AB0001)
#define HCABUS_STATUS_PAST_DEADLINE ((HCABUS_STATUS)0x60AB0002)
#define HCABUS_STATUS_TIMEOUT ((HCABUS_STATUS)0x00000102)
#define HCABUS_STATUS_INVALID_PARAMETER ((HCABUS_STATUS)0xC000000D)
#define HCABUS_STATUS_INFO_LENGTH_MISMATCH ((HCABUS_STATUS)0xC0000004)
#define HCABUS_STATUS_BUFFER_TOO_SMALL ((HCABUS_STATUS)0xC0000023)
#define HCABUS_STATUS_REVISION_MISMATCH ((HCABUS_STATUS)0xC0000059)
#define HCABUS_STATUS_NOT_SUPPORTED ((HCABUS_STATUS)0xC00000BB)
#define HCABUS_STATUS_INTERNAL_ERROR ((HCABUS_STATUS)0xC00000E5)
#define HCABUS_STATUS_DEVICE_BUSY ((HCABUS_STATUS)0x80000011)
#define HCABUS_STATUS_CAPACITY_FULL ((HCABUS_STATUS)0xE0AB0001)
#define HCABUS_STATUS_DEVICE_REMOVED ((HCABUS_STATUS)0xE0AB0002)
#define HCABUS_STATUS_UNKNOWN_CLIENT ((HCABUS_STATUS)0xE0AB0003)
#define HCABUS_STATUS_STALE_CLIENT ((HCABUS_STATUS)0xE0AB0004)
#define HCABUS_STATUS_NO_RESET_PENDING ((HCABUS_STATUS)0xE0AB0005)
#define HCABUS_STATUS_STALE_EPOCH ((HCABUS_STATUS)0xE0AB0006)
#define HCABUS_STATUS_NOT_IN_BARRIER ((HCABUS_STATUS)0xE0AB0007)
#define HCABUS_STATUS_STORM_LIMIT ((HCABUS_STATUS)0xE0AB0008)
#define HCABUS_STATUS_DEVICE_FAILED ((HCABUS_STATUS)0xE0AB0009)
#define HCABUS_STATUS_NOT_PLANNED ((HCABUS_STATUS)0xE0AB000A)
#define HCABUS_STATUS_NOT_ALLOWED ((HCABUS_STATUS)0xE0AB000B)
#define HCABUS_STATUS_TOO_LATE ((HCABUS_STATUS)0xE0AB000C)
#define HCABUS_STATUS_NOT_FAILED ((HCABUS_STATUS)0xE0AB000D)
#define HCABUS_STATUS_INVALID_POLICY ((HCABUS_STATUS)0xE0AB000E)
#define HCABUS_STATUS_THROTTLED ((HCABUS_STATUS)0xE0AB000F)
#define HCABUS_STATUS_NOT_QUERIED ((HCABUS_STATUS)0xE0AB0010)
#define HCABUS_STATUS_NO_QUERY_PENDING ((HCABUS_STATUS)0xE0AB0011)
#define HCABUS_STATUS_STOP_PENDING ((HCABUS_STATUS)0xE0AB0012)

#define HCABUS_SUCCESS(status) ((HCABUS_STATUS)(status) >= 0)

/* RESET and RESET_QUERY. */
typedef struct HCABUS_RESET_DATA {
    uint64_t Epoch;
    uint64_t DeadlineUs; /* on the bus clock: HCABUS_BUS_STATE.NowUs */
    uint32_t Reason;     /* HCABUS_REASON_* */
    uint32_t Planned;    /* 1 for a planned reset; always 1 for RESET_QUERY */
} HCABUS_RESET_DATA;

/* RESET_END (Epoch: the new epoch; Result: HCABUS_OUTCOME_*) and
 * RESET_FAILED (Epoch: the failed reset's; Result: HCABUS_FAIL_*). */
typedef struct HCABUS_RESET_END_DATA {
    uint64_t Epoch;
    uint32_t Result;
    uint32_t Reserved;
} HCABUS_RESET_END_DATA;

typedef struct HCABUS_RESET_ABORTED_DATA {
    uint64_t Epoch;
    uint64_t VetoedBy; /* the vetoer, or the client that did not answer */
    uint32_t Cause;    /* HCABUS_ABORT_* */
    uint32_t Reserved;
} HCABUS_RESET_ABORTED_DATA;

typedef struct HCABUS_DEVICE_FATAL_DATA {
    uint32_t Reason; /* HCABUS_FATAL_* */
    uint32_t Reserved;
} HCABUS_DEVICE_FATAL_DATA;

/* PORT_ACTIVE (Lid: the LID the subnet manager assigned) and PORT_DOWN (Lid 0). After every
 * RESET every port counts as down until its PORT_ACTIVE. PORT_ACTIVE comes again, with the
 * new Lid, to a client that has the port Active when a new master renumbers it. */
typedef struct HCABUS_PORT_DATA {
    uint64_t Epoch;
    uint32_t Port; /* 1 or 2 */
    uint32_t Lid;
} HCABUS_PORT_DATA;

typedef struct HCABUS_EVENT {
    uint16_t Size; /* sizeof(HCABUS_EVENT) */
    uint16_t Kind; /* HCABUS_EVENT_* */
    uint32_t Reserved;
    uint64_t ClientId; /* the client it is delivered to */
    union {
        HCABUS_RESET_DATA Reset;               /* RESET, RESET_QUERY */
        HCABUS_RESET_END_DATA ResetEnd;        /* RESET_END, RESET_FAILED */
        HCABUS_RESET_ABORTED_DATA ResetAborted;
        HCABUS_DEVICE_FATAL_DATA DeviceFatal;
        HCABUS_PORT_DATA Port;                 /* PORT_ACTIVE, PORT_DOWN */
        uint64_t Raw[4];
    } Data;
} HCABUS_EVENT;

/* Called with no bus lock held, under DISPATCH_LEVEL rules. */
typedef void (*HCABUS_EVENT_CALLBACK)(void *ClientContext, const HCABUS_EVENT *Event);

typedef struct HCABUS_CLIENT_DESC {
    uint16_t Size;  /* sizeof(HCABUS_CLIENT_DESC) */
    uint16_t Kind;  /* HCABUS_KIND_* */
    uint32_t Flags; /* HCABUS_FLAG_* */
    const char *Name; /* NUL-terminated UTF-8, 1..32 bytes; read during the call only */
    HCABUS_EVENT_CALLBACK EventCallback;
    void *ClientContext;
} HCABUS_CLIENT_DESC;

typedef struct HCABUS_REGISTRATION {
    uint64_t ClientId;
    uint64_t Epoch;
    uint32_t State; /* HCABUS_STATE_* */
    uint32_t Late;  /* 1: registered during a reset; hold nothing until its outcome */
} HCABUS_REGISTRATION;

typedef struct HCABUS_BUS_STATE {
    uint32_t Size;  /* sizeof(HCABUS_BUS_STATE), set by the caller */
    uint32_t State; /* HCABUS_STATE_* */
    uint64_t Epoch;
    uint64_t NowUs; /* the bus clock, the time base of every deadline */
} HCABUS_BUS_STATE;

typedef void (*HCABUS_INTERFACE_REFERENCE)(void *Context);
typedef HCABUS_STATUS (*HCABUS_REGISTER)(void *Context, const HCABUS_CLIENT_DESC *Desc,
                                         HCABUS_REGISTRATION *Registration);
typedef HCABUS_STATUS (*HCABUS_UNREGISTER)(void *Context, uint64_t ClientId);
/* Epoch (may be NULL) receives the epoch of the reset the request started or joined. */
typedef HCABUS_STATUS (*HCABUS_RESET_REQUEST)(void *Context, uint64_t ClientId, uint64_t *Epoch);
typedef HCABUS_STATUS (*HCABUS_RESET_EXECUTE)(void *Context, uint64_t ClientId, uint64_t Epoch);
typedef HCABUS_STATUS (*HCABUS_RESET_CONSENT)(void *Context, uint64_t ClientId, uint64_t Epoch);
/* Reason: NUL-terminated text or NULL; cut to 32 bytes, never refused for its length. */
typedef HCABUS_STATUS (*HCABUS_RESET_VETO)(void *Context, uint64_t ClientId, uint64_t Epoch,
                                           const char *Reason);
typedef HCABUS_STATUS (*HCABUS_QUERY_STATE)(void *Context, HCABUS_BUS_STATE *State);

typedef struct HCABUS_BUS_INTERFACE_V1 {
    /* The standard INTERFACE header. */
    uint16_t Size;
    uint16_t Version;
    void *Context;
    HCABUS_INTERFACE_REFERENCE InterfaceReference;
    HCABUS_INTERFACE_REFERENCE InterfaceDereference;
    /* docs/design.md §3. */
    HCABUS_REGISTER Register;
    HCABUS_UNREGISTER Unregister;
    HCABUS_RESET_REQUEST ResetRequest;
    HCABUS_RESET_EXECUTE ResetExecute;
    HCABUS_RESET_CONSENT ResetConsent;
    HCABUS_RESET_VETO ResetVeto;
    HCABUS_QUERY_STATE QueryState;
} HCABUS_BUS_INTERFACE_V1;

#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
HCABUS_STATIC_ASSERT(sizeof(HCABUS_CLIENT_DESC) == 32, "HCABUS_CLIENT_DESC layout");
HCABUS_STATIC_ASSERT(sizeof(HCABUS_REGISTRATION) == 24, "HCABUS_REGISTRATION layout");
HCABUS_STATIC_ASSERT(sizeof(HCABUS_BUS_STATE) == 24, "HCABUS_BUS_STATE layout");
HCABUS_STATIC_ASSERT(sizeof(HCABUS_EVENT) == 48, "HCABUS_EVENT layout");
HCABUS_STATIC_ASSERT(sizeof(HCABUS_BUS_INTERFACE_V1) == 88, "HCABUS_BUS_INTERFACE_V1 layout");
#endif

#ifdef __cplusplus
}
#endif

#endif /* HCABUS_H */
