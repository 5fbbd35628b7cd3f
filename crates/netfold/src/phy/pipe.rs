//! TODO(phy helper): in-memory pipe
