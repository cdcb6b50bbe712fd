// Lint rules: typescript-eslint's recommended type-aware set, with `any` banned on our own code.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['eslint.config.js', '.dependency-cruiser.cjs', 'dist/**', '.bench-build/**', 'node_modules/**', 'bench/results/**', 'bench/.peer/**', 'bench/.litellm/**', 'bench/.bifrost/**', 'coverage/**', 'tools/require-node.mjs'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  // The dashboard's browser script: plain JavaScript with the browser's globals, no type information.
  {
    files: ['src/dashboard/assets/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { parserOptions: { projectService: false }, globals: { document: 'readonly', navigator: 'readonly', Element: 'readonly', HTMLSelectElement: 'readonly' } },
  },
);
