//! TODO: sockets
