"""The Tensor's ops, one mixin per family; `zeptograd.tensor.Tensor` combines them."""
