package org.apache.rocketmq.proxy.service.route;

/** A stand-in for the proxy's route service base class, with none of its members. */
public abstract class TopicRouteService {
}
