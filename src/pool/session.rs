//! PLACEHOLDER: TensorFlow session pools.
