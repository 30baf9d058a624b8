package org.apache.rocketmq.proxy.service.route;

/** A stand-in for the route service of a proxy in local mode (it embeds its broker). */
public class LocalTopicRouteService extends TopicRouteService {
}
