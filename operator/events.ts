// Kubernetes Events (core/v1) on a ModelCatalog's transitions, so `kubectl describe mcat` tells the
// story. Recording is best effort: a failed event never fails a reconcile.
import type { CoreV1Api } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import type { ModelCatalogResource } from '../src/catalog/types.js';

export type EventType = 'Normal' | 'Warning';

export interface EventRecorder {
  record(obj: ModelCatalogResource, type: EventType, reason: string, message: string): Promise<void>;
}

export function createEventRecorder(core: CoreV1Api, component: string, instance: string, onError?: (err: unknown) => void): EventRecorder {
  return {
    async record(obj, type, reason, message) {
      const namespace = obj.metadata.namespace ?? 'default';
      const now = new Date();
      try {
        await core.createNamespacedEvent({
          namespace,
          body: {
            metadata: { name: `${obj.metadata.name}.${now.getTime().toString(16)}${randomBytes(2).toString('hex')}`, namespace },
            involvedObject: {
              apiVersion: obj.apiVersion,
              kind: obj.kind,
              name: obj.metadata.name,
              namespace,
              uid: obj.metadata.uid,
              resourceVersion: obj.metadata.resourceVersion,
            },
            type,
            reason,
            message: message.slice(0, 1024),
            source: { component },
            reportingComponent: component,
            reportingInstance: instance,
            action: 'Reconcile',
            firstTimestamp: now,
            lastTimestamp: now,
            count: 1,
          },
        });
      } catch (err) {
        onError?.(err);
      }
    },
  };
}
