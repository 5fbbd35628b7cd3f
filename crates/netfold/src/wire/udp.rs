//! TODO(wire helper): udp
