/** The polychrome.dev/v1alpha1 API: Conversation types, schema, CRD, conditions and test cases. */
export * from './conditions';
export * from './conversation-cases';
export * from './conversation-crd';
export * from './conversation-guard';
export * from './conversation-spec';
export * from './conversation-status';
export * from './conversation-types';
export * from './conversation-values';
export * from './field-patterns';
export * from './schema-builder';
export * from './schema-check';
