"""Answer callbacks' outbound side: one signed POST to a receiver, made through the outbound
policy (``core.adapters.outbound``)."""
