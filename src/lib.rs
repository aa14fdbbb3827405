//! Test and benchmark harness for the unflat workspace; the code under test lives in `encoder/` and `server/`.
