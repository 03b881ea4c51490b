//! Quartet: a Kubernetes operator for four infrastructure services.
