package org.apache.rocketmq.proxy.service.route;

import java.util.HashMap;
import java.util.Map;

/**
 * A stand-in for a cluster-mode route service of another shape than 5.1-5.3's: its cache is a
 * plain map under another name, so the agent must leave it alone.
 */
public class ClusterTopicRouteService extends TopicRouteService {
    final Map<String, Object> routes = new HashMap<String, Object>();
}
