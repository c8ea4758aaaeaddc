//! The author-stamped thread stream (work in progress).
