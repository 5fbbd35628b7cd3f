//! TODO(wire helper): ipv4
