//! What an adapter reports of a port, as `ibstat` and `ibv_devinfo` show it: the logical and
//! physical state, the LID and the subnet manager's, the link's width and speed, the GID.

wire_enum! {
    /// An InfiniBand port's logical state (IBA PortInfo:PortState).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PortState {
        Down = 1 => "down",
        Init = 2 => "init",
        Armed = 3 => "armed",
        Active = 4 => "active",
    }
}

/// Ports an adapter may have (ConnectX: 1 or 2).
pub const MAX_PORTS: u8 = 2;

wire_enum! {
    /// The link's physical state (IBA PortInfo:PortPhysicalState, `ibstat`'s "Physical
    /// state"), with the IBA's numbers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum PhysState {
        Sleep = 1 => "sleep",
        /// Looking for a peer: no cable, or nothing lit at the other end.
        Polling = 2 => "polling",
        /// The port gives no light (the device is in reset or gone).
        Disabled = 3 => "disabled",
        /// A peer is there and the link is training (PortConfigurationTraining).
        Training = 4 => "training",
        LinkUp = 5 => "link_up",
        LinkErrorRecovery = 6 => "link_error_recovery",
    }
}

wire_enum! {
    /// One lane's signalling speed (IBA PortInfo:LinkSpeedActive and its extensions).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum LinkSpeed {
        Sdr = 1 => "SDR",
        Ddr = 2 => "DDR",
        Qdr = 3 => "QDR",
        Fdr = 4 => "FDR",
        Edr = 5 => "EDR",
        Hdr = 6 => "HDR",
        Ndr = 7 => "NDR",
    }
}

impl LinkSpeed {
    /// One lane's rate in Mb/s, as `ibstat`'s "Rate" counts it (EDR 4X: 100 Gb/s).
    pub const fn lane_mbps(self) -> u32 {
        match self {
            LinkSpeed::Sdr => 2_500,
            LinkSpeed::Ddr => 5_000,
            LinkSpeed::Qdr => 10_000,
            LinkSpeed::Fdr => 14_000,
            LinkSpeed::Edr => 25_000,
            LinkSpeed::Hdr => 50_000,
            LinkSpeed::Ndr => 100_000,
        }
    }
}

/// Everything the hardware reports of one port. Only a trained link has a width and speed,
/// and only an Active port a LID and a subnet manager's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortAttrs {
    pub state: PortState,
    pub phys: PhysState,
    /// The port's LID while Active; 0 otherwise.
    pub lid: u16,
    /// The subnet manager's LID while Active; 0 otherwise.
    pub sm_lid: u16,
    /// Lanes in use (1, 2, 4, 8 or 12) while the link is up; 0 otherwise.
    pub width: u8,
    /// The lanes' speed while the link is up.
    pub speed: Option<LinkSpeed>,
    /// GID index 0: the subnet prefix and the port GUID, network byte order.
    pub gid: [u8; 16],
}

impl PortAttrs {
    /// A port in `state` with nothing else known.
    pub const fn bare(state: PortState, lid: u16) -> Self {
        PortAttrs {
            state,
            phys: match state {
                PortState::Down => PhysState::Polling,
                _ => PhysState::LinkUp,
            },
            lid,
            sm_lid: 0,
            width: 0,
            speed: None,
            gid: [0; 16],
        }
    }

    /// The link's rate in Mb/s (width times the lane's); 0 while it is not up.
    pub fn rate_mbps(&self) -> u32 {
        self.speed
            .map_or(0, |s| u32::from(self.width) * s.lane_mbps())
    }

    /// What is left of the port once it is not Active: no LID, no subnet manager's, and
    /// (with the link down) no width or speed.
    pub fn normalized(mut self) -> Self {
        if self.state != PortState::Active {
            self.lid = 0;
            self.sm_lid = 0;
        }
        if self.phys != PhysState::LinkUp {
            self.width = 0;
            self.speed = None;
        }
        self
    }
}

/// The link-local GID of the port `port` of the adapter whose node GUID is `node_guid`: the
/// default subnet prefix fe80::/64 and a port GUID of node GUID plus the port number, as
/// ConnectX assigns them.
pub fn default_gid(node_guid: u64, port: u8) -> [u8; 16] {
    let mut gid = [0u8; 16];
    gid[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
    gid[8..].copy_from_slice(&node_guid.wrapping_add(u64::from(port)).to_be_bytes());
    gid
}
